package stream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/multirail/multirail/lossy"
)

// Defaults for the zero values of Config.
const (
	DefaultBlockSize  = 256 << 10
	DefaultPacketSize = 4 << 10
	headerSize        = 8
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("stream: invalid config")

// ErrStream is wrapped by errors about what the sender sent.
var ErrStream = errors.New("stream: bad block")

// Config configures Send and Receive; both sides must use the same one.
type Config struct {
	// BlockSize is the payload bytes of a block (one stage), 1 KiB..64 MiB;
	// 0 = DefaultBlockSize.
	BlockSize int
	// PacketSize is the payload bytes of a packet, 64..16000 and at most
	// BlockSize; 0 = DefaultPacketSize.
	PacketSize int
}

func (c Config) validate() (Config, error) {
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
	}
	if c.PacketSize == 0 {
		c.PacketSize = min(DefaultPacketSize, c.BlockSize)
	}
	if c.BlockSize < 1<<10 || c.BlockSize > 64<<20 {
		return c, fmt.Errorf("%w: BlockSize = %d out of range; allowed 1 KiB..64 MiB", ErrConfig, c.BlockSize)
	}
	if c.PacketSize < 64 || c.PacketSize > 16000 || c.PacketSize > c.BlockSize {
		return c, fmt.Errorf("%w: PacketSize = %d out of range; allowed 64..16000 and at most BlockSize (%d)", ErrConfig, c.PacketSize, c.BlockSize)
	}
	return c, nil
}

// packets cuts block into packets of at most size payload bytes, each
// prefixed by the block's length (so any packet that arrives tells it);
// an empty block is one packet of just the prefix.
func packets(block []byte, size int) [][]byte {
	var h [headerSize]byte
	binary.BigEndian.PutUint64(h[:], uint64(len(block)))
	ps := [][]byte{}
	for first := true; first || len(block) > 0; first = false {
		k := min(size, len(block))
		ps = append(ps, append(h[:], block[:k]...))
		block = block[k:]
	}
	return ps
}

// SendStats says what Send did.
type SendStats struct {
	Blocks, Bytes  int64
	PacketsSent    int64
	PacketsDropped int64
}

// Send reads r to its end and sends it as blocks over sc, then an empty
// block that marks the end.
func Send(ctx context.Context, sc *lossy.StageConn, r io.Reader, cfg Config) (SendStats, error) {
	var st SendStats
	cfg, err := cfg.validate()
	if err != nil {
		return st, err
	}
	buf := make([]byte, cfg.BlockSize)
	for {
		n, err := io.ReadFull(r, buf)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return st, err
		}
		sent, serr := sc.Send(ctx, packets(buf[:n], cfg.PacketSize))
		if serr != nil {
			return st, serr
		}
		st.Blocks++
		st.Bytes += int64(n)
		st.PacketsSent += int64(sent.Packets - sent.Dropped)
		st.PacketsDropped += int64(sent.Dropped)
		if n == 0 {
			return st, nil
		}
	}
}

// ReceiveStats says what Receive did.
type ReceiveStats struct {
	Blocks, Bytes   int64
	PacketsMissing  int64 // packets concealed
	WorstBlockShare float64
}

// Receive writes the stream sent by Send on sc's peer to w, concealing
// missing packets, and reports each block's quality. It returns at the
// end-of-stream block.
func Receive(ctx context.Context, sc *lossy.StageConn, w io.Writer, cfg Config) (ReceiveStats, error) {
	st := ReceiveStats{WorstBlockShare: 1}
	cfg, err := cfg.validate()
	if err != nil {
		return st, err
	}
	prev := make([]byte, cfg.BlockSize) // the last block, for concealment
	cur := make([]byte, cfg.BlockSize)
	for {
		b, err := sc.Recv(ctx)
		if err != nil {
			return st, err
		}
		n := -1
		for _, p := range b.Packets {
			if p != nil {
				if len(p) < headerSize {
					return st, fmt.Errorf("%w: block %d: packet of %d bytes, shorter than its header", ErrStream, b.Number, len(p))
				}
				n = int(binary.BigEndian.Uint64(p))
				break
			}
		}
		want := max(1, (n+cfg.PacketSize-1)/cfg.PacketSize)
		if n < 0 || n > cfg.BlockSize || len(b.Packets) != want {
			return st, fmt.Errorf("%w: block %d of %d bytes in %d packets; allowed up to %d bytes in packets of %d", ErrStream, b.Number, n, len(b.Packets), cfg.BlockSize, cfg.PacketSize)
		}
		if n == 0 {
			return st, sc.ReportQuality(ctx, b.Number, 1)
		}
		missing := 0
		for i, p := range b.Packets {
			lo, hi := i*cfg.PacketSize, min(n, (i+1)*cfg.PacketSize)
			switch {
			case p == nil:
				missing++
				copy(cur[lo:hi], prev[lo:hi])
			case len(p) != headerSize+hi-lo || int(binary.BigEndian.Uint64(p)) != n:
				return st, fmt.Errorf("%w: block %d packet %d of %d bytes, want %d with the block's length %d", ErrStream, b.Number, i, len(p), headerSize+hi-lo, n)
			default:
				copy(cur[lo:hi], p[headerSize:])
			}
		}
		if _, err := w.Write(cur[:n]); err != nil {
			return st, err
		}
		share := 1 - float64(missing)/float64(want)
		st.Blocks++
		st.Bytes += int64(n)
		st.PacketsMissing += int64(missing)
		st.WorstBlockShare = min(st.WorstBlockShare, share)
		if err := sc.ReportQuality(ctx, b.Number, share); err != nil {
			return st, err
		}
		prev, cur = cur, prev
	}
}
