// Package rdzv is the rendezvous of a multirail job: every rank publishes
// a small opaque card (the communicator puts its host identity, data port
// and interfaces there) and gets back the cards of all ranks, indexed by
// rank.
//
// Exchange does it for one rank, at a url that is either
//
//   - tcp://HOST:PORT, a Server for the job (run by rank 0 in its own
//     process, or by `multirail run` for all ranks), or
//   - file:///ABS/DIR, a directory shared by the ranks (one host, or a
//     shared filesystem), with no server at all.
//
// Ranks start in any order and the server may come up after them:
// Exchange retries until its context is done, then returns a *WaitError
// naming the ranks still missing when the server said so, or saying that
// the server was never reachable. A definite refusal (wrong token, a card
// that disagrees with the job) is a *RefusedError, returned at once.
//
// # Token
//
// Both sides share a token: the one given, or when that is empty the
// MULTIRAIL_TOKEN environment variable (TokenEnv), as in package
// multirail; FileToken gives ranks that meet in a file:// store a token
// of the store's own. An empty token on both sides means no secret; use
// that on trusted networks only (multirail's own connections refuse a
// token under 32 characters unless told Insecure).
//
// On tcp:// the rank and the server run the Noise handshake of
// multirail's own connections under a key derived from the token, and its
// keys seal every frame after it: the cards and the table are
// confidential and authenticated. A file:// store has no channel to run a
// handshake over: its cards are authenticated (an HMAC under the token),
// not encrypted; the directory's mode (0700) keeps other users out.
//
// # tcp:// protocol (version 2)
//
// Every message is a frame: a 4-byte big-endian length n, then n bytes
// (a type byte and the body). Integers are big-endian. The reader checks n
// against the largest frame allowed in its state before allocating.
//
//	server → rank   hello   type 1: "MRDZ", version u8 = 2
//	rank → server   noise1  type 2: version u8, Noise message 1 (psk, e):
//	                        e [32], the AEAD tag of the empty payload [16]
//	server → rank   noise2  type 3: Noise message 2 (e, ee):
//	                        e [32], the AEAD tag of the empty payload [16]
//	both ways       sealed  type 9: an inner frame, its type u8 then its body,
//	                        sealed: ciphertext, then a 16-byte tag
//
// The handshake is Noise_NNpsk0_25519_AESGCM_SHA256 (package
// internal/handshake, through github.com/flynn/noise), the rank its
// initiator, with the hello body ("MRDZ" and the version byte) as
// prologue on both sides and pre-shared key HMAC-SHA256(key = token,
// "multirail/rdzv 2 token") (not the key multirail's connections derive
// from the same token; an empty token gives the HMAC under the empty
// key). From noise2 on, every frame either way is a sealed frame, under
// the keys of Noise's Split (the rank seals with the first, the server
// with the second): AES-256-GCM with no associated data, the nonce 4 zero
// bytes and then, as 8 bytes, the count of frames sealed before in that
// direction (from 0). A sealed frame of an inner frame of m bytes (type
// included) has length n = m + 17. The inner frames:
//
//	rank → server   card    type 4: jobLen u16, job id, rank u32, size u32, data
//	server → rank   status  type 5: registered u32, size u32, missing u32, n u16,
//	                        n × (first u32, last u32): the first ranges of missing ranks
//	server → rank   table   type 6: count u32, count × (len u32, data)
//	rank → server   ack     type 7: empty
//	server → rank   error   type 8: code u8 (1 auth, 2 refused, 3 protocol), text
//
// An error frame goes in clear, as a frame of its own, while the
// handshake is not done (a noise1 that is not one, of another version,
// or that does not decrypt), sealed after it.
//
// Noise message 1 decrypts only under the token's key, so the rank
// proves first, and the server proves itself (noise2) only to a rank that
// did: the server answers nobody who does not know the token and is no
// oracle for guessing it offline. A noise1 that does not decrypt gets an
// error frame (code 1) and the connection ends, a logged refusal on the
// server; a noise2 that does not decrypt ends the exchange with ErrAuth
// on the rank. A sealed frame altered, dropped, replayed, moved or
// injected on the way does not open: the connection ends, on the server
// with a logged refusal (the rank is told, code 1, sealed), on the rank
// with a *RefusedError wrapping ErrAuth. A frame in clear after the
// handshake is a protocol error.
//
// The server checks each card: its job id equal to ServerConfig.JobID
// (when empty, to the other ranks' job id), its size equal to the job's,
// its rank in range, and a rank already registered by another connection
// with other data is refused (same data is a retry: the new connection
// replaces the old one). A refused rank gets one error frame with one
// line naming the value and what was expected ("rank 3 says size 5, the
// server's job has size 4"). Registered ranks get a status frame at once
// and then at most every 250 ms while the registrations change. When
// every rank is in, each connection gets the table; the rank checks it,
// answers ack and is done. A rank whose connection breaks before the
// table connects and registers again; the server forgets a rank whose
// connection broke before the table was complete, and answers a rank
// retrying after that with the same table. Serve returns nil when every
// rank has acknowledged the table.
//
// Bounds: cards of at most ServerConfig.MaxCard bytes (default 64 KiB),
// job ids of MaxJobID bytes, tables of MaxTable bytes, MaxSize ranks (a
// sealed frame may be 17 bytes longer than its inner frame); at
// most ServerConfig.MaxPending connections in their handshake (the rest
// wait in the listen backlog) and one registered connection per rank;
// each handshake, and each later write, within
// ServerConfig.HandshakeTimeout (default 10 s), and the ack within the
// same time after the table. A client that breaks any of this loses its
// connection, never the server.
//
// # file:// store
//
// Each rank creates the directory (mode 0700), writes rank-R.card
// atomically (a temporary file renamed), then polls (5 ms doubling to
// 100 ms, until its context is done) until rank-0.card .. rank-(N-1).card
// all exist, and checks each: a card is "MRDZF" 0x01, the card body as in
// the card frame, and HMAC-SHA256(key = token, "multirail-rdzv-file" ||
// all before), in clear: there is no handshake, so nothing is encrypted.
// A card of another job id is stale (a refusal naming the file), one with
// a wrong MAC was written with another token, one of another size
// disagrees. A rank finding its own card already there with other data,
// or replaced by other data when it is done, is refused (two processes
// with one rank). Then it writes ack-R (its job id). Rank 0 waits for
// every ack, at most FileAckWait (5 s), and removes the job's files and
// the directory if that leaves it empty: after a shorter wait a stalled
// rank could lose the cards it has not read; after none, stale files
// would fail the next job in the same directory. Best is a directory per
// job (keyed by the job id): then stale files never meet another job, and
// rerunning a job id after a crash needs the directory removed.
package rdzv
