// Package stream sends a byte stream (a file, a media stream) as blocks
// over a lossy.StageConn, where a block may lose a bounded share of its
// packets: the content-distribution case of JP7684261B2, each block one
// stage.
//
// Send cuts the stream into blocks of Config.BlockSize bytes and each
// block into packets of Config.PacketSize; the StageConn's controller
// discards up to its Max share of every block's packets. Receive writes
// the blocks in order, replacing each missing packet by the same packet of
// the previous block (or zeros for the first block), which is how audio
// and video players conceal a lost packet, and reports each block's
// quality to the sender: the share of the block's packets that arrived
// (1 = complete). The controller lowers its rate when that share falls by
// more than QualityThreshold from one block to the next, and raises it
// when blocks take longer to arrive.
//
// Every packet starts with its block's length (8 bytes), so whichever
// packets arrive, the receiver writes exactly the bytes that were read;
// the stream ends with an empty block.
package stream
