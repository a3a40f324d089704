//go:build !linux

package multirail

// pollFD is one socket the poller watches; busy polling needs Linux (no
// rail can poll elsewhere, so the poller never runs).
type pollFD struct{ Revents int16 }

func newPollFD(int) pollFD { return pollFD{} }

func pollFDs([]pollFD) int { return 0 }

func osYield() {}
