package sched

// NameRoundRobin is the registry name of the round-robin scheduler.
const NameRoundRobin = "roundrobin"

func init() {
	Register(NameRoundRobin, func(cfg Config) (Scheduler, error) {
		if err := noOptions(NameRoundRobin, cfg); err != nil {
			return nil, err
		}
		return &roundRobin{}, nil
	})
}

// roundRobin is Open MPI's equal striping: rails take turns, rails that are
// not up are skipped, and the rail whose turn it is is returned even when
// its queue is full (the caller waits for room).
type roundRobin struct {
	next int // rail whose turn it is
}

func (s *roundRobin) Name() string { return NameRoundRobin }

func (s *roundRobin) Pick(now int64, size int, rails []RailState) int {
	n := len(rails)
	if n == 0 {
		return -1
	}
	i := s.next
	if i >= n || i < 0 {
		i = 0
	}
	for range n {
		if rails[i].Up {
			s.next = i + 1
			if s.next == n {
				s.next = 0
			}
			return i
		}
		i++
		if i == n {
			i = 0
		}
	}
	return -1
}

func (s *roundRobin) Departed(now int64, rail int, size int, waited int64, rails []RailState) {}
