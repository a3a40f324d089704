// The lifecycle of a rail: its phases and the named transitions between
// them. Pure state, guarded by Conn.mu; tested without sockets.

package multirail

import "errors"

// railPhase is where a rail is in its lifecycle.
//
//	       fail                 startRejoin
//	Up ──────────────▶ Down ─────────────────▶ Rejoining
//	 ▲  ◀──────────────┐ │ ▲       endRejoin       │
//	 │     attached    │ │ └─────────────────────┤
//	 │                 │ ▼ beginAttach            │ beginAttach
//	 └──────────── Attaching ◀─────────────────────┘
//	                │ attachFailed: back to Down or Rejoining
//
// Up ─fail▶ Down ─beginAttach▶ Attaching is the accepting side replacing a
// connection the dialer reconnected; close takes any phase to Closed, from
// which nothing leaves. peerDone (GOAWAY received) and refused (the peer
// no longer has the session) are facts that bar rejoining and attaching.
type railPhase uint8

const (
	// phaseUp: a live connection with its writer and reader.
	phaseUp railPhase = iota
	// phaseDown: failed; the dialing side may rejoin it.
	phaseDown
	// phaseRejoining: a rejoin attempt is dialing (dialing side).
	phaseRejoining
	// phaseAttaching: attach is swapping in a new connection.
	phaseAttaching
	// phaseClosed: the connection shut down; the rail never comes back.
	phaseClosed
)

var phaseNames = [...]string{"up", "down", "rejoining", "attaching", "closed"}

func (p railPhase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "invalid"
}

// errAttaching means a rail is already being reconnected.
var errAttaching = errors.New("multirail: rail is being reconnected")

// lifecycle is a rail's phase and the facts that constrain it.
type lifecycle struct {
	phase    railPhase
	from     railPhase // the phase beginAttach left, for attachFailed
	peerDone bool      // the peer sent GOAWAY on this rail
	refused  bool      // the peer refused a rejoin: the session is gone there
}

// up reports whether the rail carries traffic.
func (l *lifecycle) up() bool { return l.phase == phaseUp }

// fail takes an Up rail Down and reports whether it was Up.
func (l *lifecycle) fail() bool {
	if l.phase != phaseUp {
		return false
	}
	l.phase = phaseDown
	return true
}

// startRejoin begins a rejoin attempt of a Down rail, unless the peer said
// goodbye on it or refused a rejoin; it reports whether it began.
func (l *lifecycle) startRejoin() bool {
	if l.phase != phaseDown || l.peerDone || l.refused {
		return false
	}
	l.phase = phaseRejoining
	return true
}

// endRejoin ends a rejoin attempt. If it did not attach the rail, the rail
// is Down again; refused records that the peer no longer has the session.
func (l *lifecycle) endRejoin(refused bool) {
	if l.phase == phaseRejoining {
		l.phase = phaseDown
	}
	if refused && l.phase != phaseUp {
		l.refused = true
	}
}

// attachable tells whether a new connection may be attached now: not
// after close (ErrClosed), not during another attach, not after the
// peer's GOAWAY (ErrPeerClosed). An Up rail must be taken down (fail)
// before beginAttach.
func (l *lifecycle) attachable() error {
	switch {
	case l.phase == phaseClosed:
		return ErrClosed
	case l.phase == phaseAttaching:
		return errAttaching
	case l.peerDone:
		return ErrPeerClosed
	}
	return nil
}

// beginAttach starts swapping in a new connection for a Down or Rejoining
// rail and reports whether it began.
func (l *lifecycle) beginAttach() bool {
	if l.phase != phaseDown && l.phase != phaseRejoining {
		return false
	}
	l.from, l.phase = l.phase, phaseAttaching
	return true
}

// attached completes an attach: the rail is Up, and a refusal seen before
// no longer holds.
func (l *lifecycle) attached() {
	if l.phase == phaseAttaching {
		l.phase, l.refused = phaseUp, false
	}
}

// attachFailed abandons an attach: the rail goes back to the phase it
// left (Down, or Rejoining while that attempt still runs).
func (l *lifecycle) attachFailed() {
	if l.phase == phaseAttaching {
		l.phase = l.from
	}
}

// goAway records the peer's GOAWAY on this rail.
func (l *lifecycle) goAway() { l.peerDone = true }

// close ends the rail for good.
func (l *lifecycle) close() { l.phase = phaseClosed }
