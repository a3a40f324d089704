package multirail

import (
	"errors"
	"testing"
)

// TestRailLifecycle walks the rail lifecycle's transitions, allowed and
// refused, without a socket.
func TestRailLifecycle(t *testing.T) {
	type step struct {
		op   string
		ok   bool // the transition happened (for fail, startRejoin, beginAttach)
		want railPhase
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"rejoin succeeds", []step{{"fail", true, phaseDown}, {"startRejoin", true, phaseRejoining}, {"beginAttach", true, phaseAttaching}, {"attached", true, phaseUp}, {"endRejoin", true, phaseUp}}},
		{"rejoin fails to dial", []step{{"fail", true, phaseDown}, {"startRejoin", true, phaseRejoining}, {"endRejoin", true, phaseDown}, {"startRejoin", true, phaseRejoining}}},
		{"attach fails during a rejoin", []step{{"fail", true, phaseDown}, {"startRejoin", true, phaseRejoining}, {"beginAttach", true, phaseAttaching}, {"attachFailed", true, phaseRejoining}, {"startRejoin", false, phaseRejoining}, {"endRejoin", true, phaseDown}}},
		{"accepting side replaces a live rail", []step{{"beginAttach", false, phaseUp}, {"fail", true, phaseDown}, {"beginAttach", true, phaseAttaching}, {"beginAttach", false, phaseAttaching}, {"attached", true, phaseUp}}},
		{"fail twice", []step{{"fail", true, phaseDown}, {"fail", false, phaseDown}}},
		{"refused: no more rejoins", []step{{"fail", true, phaseDown}, {"startRejoin", true, phaseRejoining}, {"endRefused", true, phaseDown}, {"startRejoin", false, phaseDown}}},
		{"goodbye: no rejoin", []step{{"goAway", true, phaseUp}, {"fail", true, phaseDown}, {"startRejoin", false, phaseDown}}},
		{"closed is final", []step{{"close", true, phaseClosed}, {"fail", false, phaseClosed}, {"startRejoin", false, phaseClosed}, {"beginAttach", false, phaseClosed}, {"attached", true, phaseClosed}}},
		{"closed during an attach", []step{{"fail", true, phaseDown}, {"beginAttach", true, phaseAttaching}, {"close", true, phaseClosed}, {"attachFailed", true, phaseClosed}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l lifecycle
			for i, s := range tc.steps {
				ok := true
				switch s.op {
				case "fail":
					ok = l.fail()
				case "startRejoin":
					ok = l.startRejoin()
				case "endRejoin":
					l.endRejoin(false)
				case "endRefused":
					l.endRejoin(true)
				case "beginAttach":
					ok = l.beginAttach()
				case "attached":
					l.attached()
				case "attachFailed":
					l.attachFailed()
				case "goAway":
					l.goAway()
				case "close":
					l.close()
				}
				if ok != s.ok || l.phase != s.want {
					t.Fatalf("step %d %s: ok=%v phase %v, want ok=%v phase %v", i, s.op, ok, l.phase, s.ok, s.want)
				}
			}
		})
	}
}

func TestRailAttachable(t *testing.T) {
	for _, tc := range []struct {
		l    lifecycle
		want error
	}{
		{lifecycle{phase: phaseDown}, nil},
		{lifecycle{phase: phaseUp}, nil},
		{lifecycle{phase: phaseRejoining}, nil},
		{lifecycle{phase: phaseAttaching}, errAttaching},
		{lifecycle{phase: phaseClosed}, ErrClosed},
		{lifecycle{phase: phaseDown, peerDone: true}, ErrPeerClosed},
	} {
		if err := tc.l.attachable(); !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Errorf("%v (peerDone %v): %v, want %v", tc.l.phase, tc.l.peerDone, err, tc.want)
		}
	}
	if railPhase(9).String() != "invalid" || phaseRejoining.String() != "rejoining" {
		t.Error("phase names")
	}
}
