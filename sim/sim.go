package sim

import (
	"math/rand/v2"
	"time"

	"github.com/multirail/multirail/internal/fifo"
	"github.com/multirail/multirail/internal/sender"
	"github.com/multirail/multirail/sched"

	// Every scheduler of the module is available to scenarios.
	_ "github.com/multirail/multirail/sched/qlearn"
)

// RateWindow is the shortest interval of virtual time a drain-rate sample
// spans, as in the live transport: a rail's RailState.RateBps is a moving
// average (weight sender.RateGain) of samples of the bytes it transmitted
// over at least RateWindow during which it stayed busy. The estimate, the
// queues and the dispatch release are those of the live transport: both
// drive internal/sender.
const RateWindow = sender.DefaultRateWindow

// MaxBins is the most time bins Result.Series has; the bins widen (by
// doubling) to stay within it.
const MaxBins = 256

// Lanes of a sender: eager messages (at most EagerLimit bytes) slip in
// between the segments of large messages, which are queued one message
// after the other.
const (
	laneEager = 0
	laneLarge = 1
)

// Blocked states of a lane (otherwise the rail it waits for).
const (
	laneFree  = -1 // not waiting
	laneAnyCh = -2 // Pick declined: waiting for any departure or rail change
)

// Message roles.
const (
	msgData uint8 = iota
	msgRequest
	msgResponse
)

// Sim is one run of a scenario with one scheduler, in virtual time. Build
// it with New, advance it with Step or Run, and read Result. A Sim is not
// safe for concurrent use; distinct Sims are independent.
type Sim struct {
	sc        Scenario // resolved
	schedName string
	now, end  int64
	h         eventHeap

	links []link
	rails []rail
	info  []railInfo

	segs    []segment
	freeSeg []int32
	acking  int // segments arrived, their ack to the sender pending
	msgs    []message
	freeMsg []int32

	segSize  int64
	qcap     int
	eager    int64
	dispatch int64

	rng *rand.Rand // traffic

	// Traffic state.
	submitted, completed int64
	cumWeight            []float64 // mixed: cumulative weights of sizes
	meanGap              float64   // mixed Poisson: mean ns between messages
	ranks                []rankState
	itDone               []int32
	lastIterEnd          int64
	itersDone            int

	// Statistics.
	events uint64
	done   bool // finite traffic completed
	over   bool // the run ended
	endT   int64
	forced uint64
	bugs   uint64
	plans  uint64 // messages planned
	moved  uint64 // queued segments moved by steal

	laneBuf     []sender.Lane // the planner's scratch
	shareBuf    []int64
	segsSent    uint64
	segsArrived uint64
	delivered   int64 // payload bytes arrived
	offered     int64 // payload bytes submitted
	completions []int64
	groups      []group
	bin         int64 // width of a series bin
	binIdx      int   // bin of binEnd-bin..binEnd
	binEnd      int64
	result      *Result
}

type link struct {
	sch    sched.Scheduler
	obs    sched.DeliveryObserver // sch, if it learns from deliveries
	states []sched.RailState
	rail0  int32
	n      int32
	lanes  [2]lane
	busy   int32 // segments queued or in transmission
	tick   bool  // a dispatch tick is scheduled
	plans  bool  // the scheduler leaves large messages to the planner
}

type lane struct {
	head    int32             // message being queued, -1 if none
	blocked int32             // laneFree, laneAnyCh or the rail waited for
	pending fifo.Queue[int32] // messages behind head, oldest first
	planned bool              // head is queued by plan: cur/end per rail
	cur     []int64
	end     []int64
}

type rail struct {
	link, local, group int32
	cur                int32 // segment in transmission, -1 if none
	delay              int64
	prof               profile
	// core holds the send queue, the segment in transmission (in flight
	// until its transmission ends), the dispatch release and the
	// drain-rate estimate, as in the live transport.
	core *sender.Rail[int32]
}

// railInfo is what a run keeps of a rail off the hot path.
type railInfo struct {
	nominal float64
	loads   []Load
	stream  uint64
}

type segment struct {
	msg     int32
	rail    int32 // global rail index
	group   int32 // result group of its rail
	payload int32
	enq     int64
}

type message struct {
	link      int32
	rank      int32
	role      uint8
	size      int64
	off       int64 // bytes queued so far
	arrived   int64 // bytes delivered so far
	submitted int64
	origin    int64 // reqresp response: when its request was submitted
	planned   bool  // queued by the planner
}

type rankState struct {
	step, sent, recv int64
	iters            int32
}

type group struct {
	name    string
	capBits float64
	arrived int64
	bins    []int64
}

// New builds a run of sc with the scheduler registered as schedName. It
// validates sc and does not keep a reference to it.
func New(sc *Scenario, schedName string) (*Sim, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	r := sc.resolved()
	s := &Sim{
		sc: r, schedName: schedName,
		end:      int64(r.Duration),
		segSize:  int64(r.SegmentSize),
		qcap:     r.QueueDepth,
		eager:    int64(r.EagerLimit),
		dispatch: int64(r.DispatchInterval),
		rng:      rand.New(rand.NewPCG(r.Seed, mix(r.Seed^0x7af1c))),
	}
	t := &r.Traffic
	var err error
	switch t.Kind {
	case KindBulk, KindMixed:
		err = s.addLink(r.Rails, 0)
	case KindReqResp:
		if err = s.addLink(r.Rails, 0); err == nil {
			err = s.addLink(t.ReverseRails, len(r.Rails))
		}
	case KindAllreduce:
		for _, tr := range r.Rails {
			s.groups = append(s.groups, group{name: tr.Name})
		}
		setup := rand.New(rand.NewPCG(r.Seed^0xa11ed, mix(r.Seed+1)))
		rails := make([]Rail, 0, len(r.Rails))
		for range t.Ranks {
			k := t.RailsMin + setup.IntN(t.RailsMax-t.RailsMin+1)
			rails = rails[:0]
			for j := range k {
				rl := r.Rails[j]
				if t.RateJitter > 0 {
					rl.RateBps *= 1 + t.RateJitter*(2*setup.Float64()-1)
				}
				rails = append(rails, rl)
			}
			if err = s.addLink(rails, -1); err != nil {
				break
			}
		}
	}
	if err != nil {
		return nil, err
	}
	s.bin = int64(r.SeriesBin)
	if s.bin == 0 {
		s.bin = int64(time.Millisecond)
		if !sc.finite() {
			s.bin = max(int64(time.Microsecond), int64(r.Duration)/100)
		}
	}
	for i := range s.groups {
		s.groups[i].bins = make([]int64, 0, MaxBins)
	}
	s.segs = make([]segment, 0, 1024)
	s.msgs = make([]message, 0, 256)
	s.completions = make([]int64, 0, 1024)
	s.start()
	return s, nil
}

// addLink adds a sender with its own rails and scheduler. group0 >= 0
// gives each rail its own result group, numbered from group0; -1 puts
// rail j in group j (allreduce: the template rail).
func (s *Sim) addLink(rails []Rail, group0 int) error {
	li := int32(len(s.links))
	bw := make([]float64, len(rails))
	for i, r := range rails {
		bw[i] = r.RateBps
	}
	seed := s.sc.Seed
	if li > 0 {
		seed = mix(seed + uint64(li))
	}
	sch, err := sched.New(s.schedName, sched.Config{Rails: len(rails), SegmentSize: s.sc.SegmentSize, Bandwidths: bw, Seed: seed,
		Options: s.sc.SchedOptions[s.schedName]})
	if err != nil {
		return err
	}
	L := link{sch: sch, states: make([]sched.RailState, len(rails)), rail0: int32(len(s.rails)), n: int32(len(rails))}
	L.obs, _ = sch.(sched.DeliveryObserver)
	if p, ok := sch.(sched.Planning); ok && p.Plans() && s.sc.PlanMin >= 0 && len(rails) > 1 {
		L.plans = true
	}
	for k := range L.lanes {
		L.lanes[k].head, L.lanes[k].blocked = -1, laneFree
	}
	for i, r := range rails {
		var nominal float64 // what the scheduler is told of the rail's rate
		if s.sc.KnownBandwidths {
			nominal = r.RateBps
		}
		g := int32(i)
		if group0 >= 0 {
			g = int32(group0 + i)
			s.groups = append(s.groups, group{name: r.Name})
		}
		stream := uint64(len(s.rails))
		core, err := sender.New[int32](sender.Config{QueueDepth: s.qcap, SegmentSize: s.sc.SegmentSize,
			RateWindow: RateWindow, Dispatched: s.dispatch > 0, Nominal: nominal})
		if err != nil {
			return err
		}
		L.states[i].Up = true
		core.Fill(&L.states[i])
		s.rails = append(s.rails, rail{
			link: li, local: int32(i), group: g, cur: -1, delay: int64(r.Delay),
			prof: newProfile(r.RateBps, r.Load, s.sc.Seed, stream), core: core,
		})
		s.info = append(s.info, railInfo{nominal: r.RateBps, loads: r.Load, stream: stream})
	}
	s.links = append(s.links, L)
	return nil
}

func (s *Sim) schedule(t int64, kind uint32, a int32) {
	s.h.push(t, kind, a)
}

// start submits the traffic present at time 0.
func (s *Sim) start() {
	t := &s.sc.Traffic
	switch t.Kind {
	case KindBulk:
		for range t.Window {
			if !s.moreMessages() {
				break
			}
			s.submit(0, t.Size, msgData, 0, 0)
		}
	case KindMixed:
		var w float64
		for _, sw := range t.Sizes {
			w += sw.Weight
			s.cumWeight = append(s.cumWeight, w)
		}
		offered := t.RateBps
		if t.Load > 0 {
			for i := range s.rails {
				offered += t.Load * s.info[i].nominal
			}
		}
		if offered > 0 {
			var mean float64
			for _, sw := range t.Sizes {
				mean += float64(sw.Size) * sw.Weight / w
			}
			s.meanGap = mean * 8 / offered * 1e9
			s.schedule(expNs(s.rng, s.meanGap), evSubmit, 0)
			return
		}
		for range t.Window {
			if !s.moreMessages() {
				break
			}
			s.submit(0, s.mixedSize(), msgData, 0, 0)
		}
	case KindReqResp:
		for range t.Window {
			if !s.moreMessages() {
				break
			}
			s.submit(0, t.Request, msgRequest, 0, 0)
		}
	case KindAllreduce:
		s.ranks = make([]rankState, t.Ranks)
		s.itDone = make([]int32, t.Iterations)
		for r := range s.ranks {
			s.advanceRank(int32(r))
		}
	}
}

func (s *Sim) moreMessages() bool {
	return s.sc.Traffic.Count == 0 || s.submitted < s.sc.Traffic.Count
}

func (s *Sim) mixedSize() int64 {
	sizes := s.sc.Traffic.Sizes
	u := s.rng.Float64() * s.cumWeight[len(s.cumWeight)-1]
	for i, c := range s.cumWeight {
		if u < c {
			return sizes[i].Size
		}
	}
	return sizes[len(sizes)-1].Size
}

// submit hands a message of size bytes to link li's sender now.
func (s *Sim) submit(li int32, size int64, role uint8, origin int64, rank int32) {
	var mi int32
	if n := len(s.freeMsg); n > 0 {
		mi = s.freeMsg[n-1]
		s.freeMsg = s.freeMsg[:n-1]
	} else {
		mi = int32(len(s.msgs))
		s.msgs = append(s.msgs, message{})
	}
	s.msgs[mi] = message{link: li, rank: rank, role: role, size: size, submitted: s.now, origin: origin}
	if role != msgResponse {
		s.submitted++
	}
	s.offered += size
	L := &s.links[li]
	k := laneLarge
	if size <= s.eager {
		k = laneEager
	}
	ln := &L.lanes[k]
	if ln.head >= 0 {
		ln.pending.Push(mi)
		return
	}
	ln.head = mi
	s.pumpLane(L, ln)
}

// pumpLane queues the lane's segments on the rails the scheduler picks
// until the lane is empty or has to wait.
func (s *Sim) pumpLane(L *link, ln *lane) {
	for ln.head >= 0 {
		mi := ln.head
		m := &s.msgs[mi]
		if ln.planned || (m.off == 0 && ln == &L.lanes[laneLarge] && s.plansMsg(L, m.size)) {
			if !s.pumpPlanned(L, ln, mi) {
				return
			}
			continue
		}
		payload := min(s.segSize, m.size-m.off)
		size := int(payload) + HeaderSize
		r := ln.blocked
		if r >= 0 {
			if L.states[r].Queued >= s.qcap {
				return // still no room on the rail the scheduler chose
			}
		} else {
			r = int32(L.sch.Pick(s.now, size, L.states))
			if r < 0 || r >= L.n || !L.states[r].Up {
				if L.busy > 0 {
					ln.blocked = laneAnyCh
					return
				}
				// Nothing in flight will ever wake this sender: a
				// scheduler that declines now would stall the run.
				r = s.fallback(L)
				s.forced++
			} else if L.states[r].Queued >= s.qcap {
				ln.blocked = r
				return
			}
		}
		ln.blocked = laneFree
		s.enqueue(L, r, mi, payload)
		m.off += payload
		if m.off == m.size {
			ln.head = -1
			if ln.pending.Len() > 0 {
				ln.head = ln.pending.Pop()
			}
		}
	}
}

func (s *Sim) fallback(L *link) int32 {
	for i := range L.states {
		if L.states[i].Usable() {
			return int32(i)
		}
	}
	return 0
}

// wake lets link L's waiting lanes try again after a departure or a
// change of a rail's state.
func (s *Sim) wake(L *link) {
	for k := range L.lanes {
		ln := &L.lanes[k]
		if ln.head >= 0 {
			s.pumpLane(L, ln)
		}
	}
}

// enqueue puts a segment of message mi on link L's rail r.
func (s *Sim) enqueue(L *link, r int32, mi int32, payload int64) {
	var si int32
	if n := len(s.freeSeg); n > 0 {
		si = s.freeSeg[n-1]
		s.freeSeg = s.freeSeg[:n-1]
	} else {
		si = int32(len(s.segs))
		s.segs = append(s.segs, segment{})
	}
	ri := L.rail0 + r
	s.segs[si] = segment{msg: mi, rail: ri, group: s.rails[ri].group, payload: int32(payload), enq: s.now}
	rl := &s.rails[ri]
	L.busy++
	s.segsSent++
	rl.core.Push(s.now, si, int(payload)+HeaderSize)
	if s.dispatch == 0 && rl.cur < 0 {
		// An idle rail's queue was empty: the segment leaves it at once.
		s.startService(rl, ri, s.depart(L, rl))
		return
	}
	rl.core.Fill(&L.states[r])
	if s.dispatch > 0 && !L.tick {
		L.tick = true
		s.schedule((s.now/s.dispatch+1)*s.dispatch, evTick, rl.link)
	}
}

// depart takes the head of rl's queue into transmission, tells the
// scheduler and returns the segment.
func (s *Sim) depart(L *link, rl *rail) int32 {
	e := rl.core.Take(s.now)
	rl.core.Fill(&L.states[rl.local])
	L.sch.Departed(s.now, int(rl.local), e.Size, s.now-e.Enq, L.states)
	return e.Seg
}

// startService starts transmitting segment si on the idle rail rl.
func (s *Sim) startService(rl *rail, ri int32, si int32) {
	sg := &s.segs[si]
	rl.cur = si
	fin := rl.prof.finish(s.now, float64(int64(sg.payload)+HeaderSize)*8)
	if fin != never {
		s.schedule(fin, evTxDone, ri)
	}
}

// Step runs up to n events and reports whether the run goes on.
func (s *Sim) Step(n int) bool {
	if s.over {
		return false
	}
	for range n {
		if s.done || s.h.len() == 0 || s.h.first() > s.end {
			s.over = true
			s.endT = s.end
			if s.done {
				s.endT = s.now
			}
			return false
		}
		e := s.h.pop()
		s.now = e.t
		s.events++
		switch a := e.arg(); e.kind() {
		case evTxDone:
			s.txDone(a)
		case evArrive:
			s.arrive(a)
		case evSubmit:
			s.poissonSubmit(a)
		case evTick:
			s.tick(a)
		case evAck:
			s.ack(a)
		}
	}
	return true
}

// Run runs the simulation to its end and returns the result.
func (s *Sim) Run() *Result {
	for s.Step(1 << 16) {
	}
	return s.Result()
}

// Now is the virtual time reached.
func (s *Sim) Now() time.Duration { return time.Duration(s.now) }

// End is the virtual time at which the run stops at the latest.
func (s *Sim) End() time.Duration { return time.Duration(s.end) }

// Events is the number of events run so far.
func (s *Sim) Events() uint64 { return s.events }

func (s *Sim) txDone(ri int32) {
	rl := &s.rails[ri]
	L := &s.links[rl.link]
	si := rl.cur
	// The segment's transmission ended: for the rail's sender core that is
	// its acknowledgement (the simulator has no sender-side socket buffer),
	// which feeds the drain-rate estimate. It says, as the transport's ACKs
	// do, when the segment arrives at the peer: one delay from now.
	_, _ = rl.core.AckArrived(s.now, rl.core.Acked()+1, s.now+rl.delay, nil)
	rl.core.Fill(&L.states[rl.local])
	s.schedule(s.now+rl.delay, evArrive, si)
	L.busy--
	if L.plans && rl.core.Len() == 0 {
		s.steal(L, rl, ri)
	}
	if rl.core.Sendable() > 0 {
		s.startService(rl, ri, s.depart(L, rl))
	} else {
		rl.cur = -1
	}
	s.wake(L)
}

func (s *Sim) tick(li int32) {
	L := &s.links[li]
	L.tick = false
	for r := L.rail0; r < L.rail0+L.n; r++ {
		// As in the transport: the tick releases what is queued now; the
		// released segments stay in the queue (and count against its
		// capacity) until the rail's transmitter takes them.
		rl := &s.rails[r]
		rl.core.Tick()
		if rl.cur < 0 && rl.core.Sendable() > 0 {
			s.startService(rl, r, s.depart(L, rl))
		}
	}
	s.wake(L) // may queue segments, which schedules the next tick
	if L.tick {
		return
	}
	for i := range L.states {
		if L.states[i].Queued > 0 {
			L.tick = true
			s.schedule(s.now+s.dispatch, evTick, li)
			break
		}
	}
}

func (s *Sim) arrive(si int32) {
	sg := s.segs[si]
	if rl := &s.rails[sg.rail]; s.links[rl.link].obs != nil {
		// The sender learns of the arrival after the way back (the
		// transport's ACK); the segment is freed then.
		s.schedule(s.now+rl.delay, evAck, si)
		s.acking++
	} else {
		s.freeSeg = append(s.freeSeg, si)
	}
	p := int64(sg.payload)
	s.delivered += p
	s.segsArrived++
	s.addBin(sg.group, p)
	m := &s.msgs[sg.msg]
	m.arrived += p
	switch {
	case m.arrived == m.size:
		s.complete(sg.msg)
	case m.arrived > m.size:
		s.bugs++
	}
}

// ack tells the sender's scheduler that segment si was delivered, one
// propagation delay after it arrived, and frees the segment.
func (s *Sim) ack(si int32) {
	sg := &s.segs[si]
	rl := &s.rails[sg.rail]
	L := &s.links[rl.link]
	L.obs.Delivered(s.now, int(rl.local), int(sg.payload)+HeaderSize, s.now-sg.enq, L.states)
	s.freeSeg = append(s.freeSeg, si)
	s.acking--
}

// addBin counts bytes delivered now for group g.
func (s *Sim) addBin(g int32, bytes int64) {
	if s.now >= s.binEnd {
		s.binIdx = int(s.now / s.bin)
		for s.binIdx >= MaxBins {
			s.widenBins()
			s.binIdx = int(s.now / s.bin)
		}
		s.binEnd = int64(s.binIdx+1) * s.bin
	}
	i := s.binIdx
	gr := &s.groups[g]
	for len(gr.bins) <= i {
		gr.bins = append(gr.bins, 0)
	}
	gr.bins[i] += bytes
	gr.arrived += bytes
}

// widenBins doubles the bin width, merging pairs of bins.
func (s *Sim) widenBins() {
	s.bin *= 2
	for g := range s.groups {
		b := s.groups[g].bins
		n := (len(b) + 1) / 2
		for i := range n {
			v := b[2*i]
			if 2*i+1 < len(b) {
				v += b[2*i+1]
			}
			b[i] = v
		}
		s.groups[g].bins = b[:n]
	}
}

func (s *Sim) freeMessage(mi int32) {
	s.freeMsg = append(s.freeMsg, mi)
}

func (s *Sim) record(d int64) {
	s.completions = append(s.completions, d)
}

// complete handles the arrival of message mi's last byte.
func (s *Sim) complete(mi int32) {
	m := s.msgs[mi]
	s.freeMessage(mi)
	t := &s.sc.Traffic
	switch t.Kind {
	case KindBulk, KindMixed:
		s.record(s.now - m.submitted)
		s.completed++
		if s.meanGap == 0 && s.moreMessages() {
			size := t.Size
			if t.Kind == KindMixed {
				size = s.mixedSize()
			}
			s.submit(0, size, msgData, 0, 0)
		}
		if t.Count > 0 && s.completed == t.Count {
			s.done = true
		}
	case KindReqResp:
		if m.role == msgRequest {
			s.submit(1, t.Response, msgResponse, m.submitted, 0)
			return
		}
		s.record(s.now - m.origin)
		s.completed++
		if s.moreMessages() {
			s.submit(0, t.Request, msgRequest, 0, 0)
		}
		if t.Count > 0 && s.completed == t.Count {
			s.done = true
		}
	case KindAllreduce:
		s.completed++
		src := m.rank
		dst := src + 1
		if int(dst) == len(s.ranks) {
			dst = 0
		}
		s.ranks[src].sent++
		s.ranks[dst].recv++
		s.advanceRank(src)
		s.advanceRank(dst)
	}
}

// advanceRank starts rank r's next allreduce step when it may, and counts
// the iterations it finished.
func (s *Sim) advanceRank(r int32) {
	rk := &s.ranks[r]
	steps := int64(2 * (len(s.ranks) - 1))
	total := steps * int64(len(s.itDone))
	if rk.step < total && rk.recv >= rk.step && rk.sent >= rk.step {
		rk.step++
		s.submit(r, s.sc.Traffic.Size/int64(len(s.ranks)), msgData, 0, r)
	}
	for it := min(rk.sent, rk.recv) / steps; int64(rk.iters) < it; rk.iters++ {
		s.itDone[rk.iters]++
		if int(s.itDone[rk.iters]) == len(s.ranks) {
			s.record(s.now - s.lastIterEnd)
			s.lastIterEnd = s.now
			s.itersDone++
			if s.itersDone == len(s.itDone) {
				s.done = true
			}
		}
	}
}

func (s *Sim) poissonSubmit(li int32) {
	if !s.moreMessages() {
		return
	}
	s.submit(li, s.mixedSize(), msgData, 0, 0)
	if s.moreMessages() {
		s.schedule(s.now+expNs(s.rng, s.meanGap), evSubmit, li)
	}
}

// Run runs scenario sc with the scheduler schedName to the end.
func Run(sc *Scenario, schedName string) (*Result, error) {
	s, err := New(sc, schedName)
	if err != nil {
		return nil, err
	}
	return s.Run(), nil
}
