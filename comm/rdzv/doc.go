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
// token under 32 characters unless told Insecure). Nothing is encrypted;
// the token authenticates the handshake, the card and the table.
//
// # tcp:// protocol (version 1)
//
// Every message is a frame: a 4-byte big-endian length n, then n bytes
// (a type byte and the body). Integers are big-endian. The reader checks n
// against the largest frame allowed in its state before allocating.
//
//	server → rank   hello   type 1: "MRDZ", version u8 = 1, nonceS [32]
//	rank → server   auth    type 2: version u8, nonceC [32],
//	                        HMAC(token, "multirail-rdzv-client" || nonceS || nonceC)
//	server → rank   proof   type 3: HMAC(token, "multirail-rdzv-server" || nonceS || nonceC)
//	rank → server   card    type 4: jobLen u16, job id, rank u32, size u32, data,
//	                        HMAC(token, "multirail-rdzv-card" || nonceS || nonceC || all before)
//	server → rank   status  type 5: registered u32, size u32, missing u32, n u16,
//	                        n × (first u32, last u32): the first ranges of missing ranks
//	server → rank   table   type 6: count u32, count × (len u32, data),
//	                        HMAC(token, "multirail-rdzv-table" || nonceS || nonceC || all before)
//	rank → server   ack     type 7: empty
//	server → rank   error   type 8: code u8 (1 auth, 2 refused, 3 protocol), text
//
// HMAC is HMAC-SHA256 (32 bytes); nonces are random. The rank proves
// first and the server proves itself only to a rank that did, so the
// server answers nobody who does not know the token and is no oracle for
// guessing it offline. A wrong proof from either side ends the exchange
// with ErrAuth on the rank (and a logged refusal on the server).
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
// job ids of MaxJobID bytes, tables of MaxTable bytes, MaxSize ranks; at
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
// the card frame, and HMAC(token, "multirail-rdzv-file" || all before).
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
