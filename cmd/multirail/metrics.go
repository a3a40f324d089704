package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/multirail/multirail"
	"github.com/multirail/multirail/comm"
	"github.com/multirail/multirail/tunnel"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Prometheus metrics of a long-running command (--metrics ADDR): the
// telemetry of every live connection (multirail.Conn.Stats) read at each
// scrape. Names follow Prometheus' conventions (multirail_ prefix, base
// units, _total counters); the only labels are peer and rail.

// metricsConns is the set of connections /metrics reports on.
type metricsConns struct {
	mu      sync.Mutex
	conns   map[*multirail.Conn]string // the peer label of each
	tunnels map[*tunnel.Session]string
	comms   map[*comm.Comm]bool
}

// addTunnel starts reporting tunnel session s under peer; the returned func
// stops it.
func (m *metricsConns) addTunnel(s *tunnel.Session, peer string) (remove func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tunnels == nil {
		m.tunnels = make(map[*tunnel.Session]string)
	}
	m.tunnels[s] = peer
	return func() {
		m.mu.Lock()
		delete(m.tunnels, s)
		m.mu.Unlock()
	}
}

// addComm starts reporting communicator c: its peer connections (peer
// label: the peer's rank) and its collectives.
func (m *metricsConns) addComm(c *comm.Comm) (remove func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.comms == nil {
		m.comms = make(map[*comm.Comm]bool)
	}
	m.comms[c] = true
	return func() {
		m.mu.Lock()
		delete(m.comms, c)
		m.mu.Unlock()
	}
}

func (m *metricsConns) commSnapshot() map[*comm.Comm]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[*comm.Comm]bool, len(m.comms))
	for c := range m.comms {
		out[c] = true
	}
	return out
}

func (m *metricsConns) tunnelSnapshot() map[*tunnel.Session]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[*tunnel.Session]string, len(m.tunnels))
	for s, p := range m.tunnels {
		out[s] = p
	}
	return out
}

// add starts reporting c under peer; the returned func stops it.
func (m *metricsConns) add(c *multirail.Conn, peer string) (remove func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conns == nil {
		m.conns = make(map[*multirail.Conn]string)
	}
	m.conns[c] = peer
	return func() {
		m.mu.Lock()
		delete(m.conns, c)
		m.mu.Unlock()
	}
}

func (m *metricsConns) snapshot() map[*multirail.Conn]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[*multirail.Conn]string, len(m.conns))
	for c, p := range m.conns {
		out[c] = p
	}
	return out
}

var (
	railLabels = []string{"peer", "rail"}
	peerLabels = []string{"peer"}

	mRailSentBytes    = prometheus.NewDesc("multirail_rail_sent_bytes_total", "Bytes of data frames written on the rail, headers included.", railLabels, nil)
	mRailRecvBytes    = prometheus.NewDesc("multirail_rail_received_bytes_total", "Payload bytes received on the rail.", railLabels, nil)
	mRailSentSegs     = prometheus.NewDesc("multirail_rail_sent_segments_total", "Data segments written on the rail.", railLabels, nil)
	mRailRecvSegs     = prometheus.NewDesc("multirail_rail_received_segments_total", "Data segments received on the rail.", railLabels, nil)
	mRailResent       = prometheus.NewDesc("multirail_rail_resent_segments_total", "Segments queued on the rail again because the rail that first carried them failed.", railLabels, nil)
	mRailUp           = prometheus.NewDesc("multirail_rail_up", "1 while the rail carries traffic, 0 while it is down.", railLabels, nil)
	mRailRejoins      = prometheus.NewDesc("multirail_rail_rejoins_total", "Times a new TCP connection replaced the rail's failed one.", railLabels, nil)
	mRailErrors       = prometheus.NewDesc("multirail_rail_errors_total", "Failures seen on the rail, by reason (stalled, reset, closed, timeout, protocol, other).", []string{"peer", "rail", "reason"}, nil)
	mRailQueue        = prometheus.NewDesc("multirail_rail_queue_segments", "Segments in the rail's send queue.", railLabels, nil)
	mRailQueueBytes   = prometheus.NewDesc("multirail_rail_queue_bytes", "Bytes in the rail's send queue.", railLabels, nil)
	mRailQueueDelay   = prometheus.NewDesc("multirail_rail_queue_delay_seconds", "Queueing delay of the last segment that left the rail's send queue.", railLabels, nil)
	mRailInFlight     = prometheus.NewDesc("multirail_rail_in_flight_segments", "Segments written on the rail and not yet acknowledged.", railLabels, nil)
	mRailDrain        = prometheus.NewDesc("multirail_rail_drain_rate_bytes_per_second", "The rail's measured delivery rate (0 until measured).", railLabels, nil)
	mRailAckDelay     = prometheus.NewDesc("multirail_rail_ack_delay_seconds", "Smoothed time from a segment's write to its acknowledgement (0 until measured).", railLabels, nil)
	mSchedShare       = prometheus.NewDesc("multirail_scheduler_choice_share", "The rail's share of the scheduler's last 64 choices.", railLabels, nil)
	mSchedDecisions   = prometheus.NewDesc("multirail_scheduler_decisions_total", "The scheduler's decisions.", peerLabels, nil)
	mMessagesSent     = prometheus.NewDesc("multirail_messages_sent_total", "Whole messages sent.", peerLabels, nil)
	mMessagesRecv     = prometheus.NewDesc("multirail_messages_received_total", "Whole messages received.", peerLabels, nil)
	mStageDiscard     = prometheus.NewDesc("multirail_stage_discard_ratio", "Discard rate the next loss-tolerant stage will be sent with.", peerLabels, nil)
	mStagePacketsSent = prometheus.NewDesc("multirail_stage_packets_sent_total", "Loss-tolerant stage packets handed to the transport.", peerLabels, nil)
	mStagePacketsDrop = prometheus.NewDesc("multirail_stage_packets_dropped_total", "Loss-tolerant stage packets discarded.", peerLabels, nil)
	collLabels        = []string{"op", "algo"}
	mCollCalls        = prometheus.NewDesc("multirail_collective_calls_total", "Collective calls, by operation and algorithm.", collLabels, nil)
	mCollFailed       = prometheus.NewDesc("multirail_collective_failed_total", "Collective calls that failed.", collLabels, nil)
	mCollSeconds      = prometheus.NewDesc("multirail_collective_seconds_total", "Time spent in collective calls (divide by the calls for the mean duration).", collLabels, nil)
	mCollBytes        = prometheus.NewDesc("multirail_collective_bytes_total", "Element bytes this rank passed to collective calls.", collLabels, nil)
	mTunnelOpen       = prometheus.NewDesc("multirail_tunnel_streams_open", "Tunnel streams open now.", peerLabels, nil)
	mTunnelOpened     = prometheus.NewDesc("multirail_tunnel_streams_opened_total", "Tunnel streams opened.", peerLabels, nil)
	mTunnelReset      = prometheus.NewDesc("multirail_tunnel_streams_reset_total", "Tunnel streams ended by a reset (either end's) rather than by an orderly close.", peerLabels, nil)
	mTunnelSent       = prometheus.NewDesc("multirail_tunnel_sent_bytes_total", "Stream bytes read from local connections and sent to the peer.", peerLabels, nil)
	mTunnelRecv       = prometheus.NewDesc("multirail_tunnel_received_bytes_total", "Stream bytes received from the peer.", peerLabels, nil)
)

// connCollector is a prometheus.Collector over metricsConns.
type connCollector struct{ conns *metricsConns }

// connDescs are every metric connCollector reports.
var connDescs = []*prometheus.Desc{mRailSentBytes, mRailRecvBytes, mRailSentSegs, mRailRecvSegs, mRailResent, mRailUp,
	mRailRejoins, mRailErrors, mRailQueue, mRailQueueBytes, mRailQueueDelay, mRailInFlight, mRailDrain, mRailAckDelay,
	mSchedShare, mSchedDecisions, mMessagesSent, mMessagesRecv, mStageDiscard, mStagePacketsSent, mStagePacketsDrop,
	mTunnelOpen, mTunnelOpened, mTunnelReset, mTunnelSent, mTunnelRecv,
	mCollCalls, mCollFailed, mCollSeconds, mCollBytes}

func (connCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range connDescs {
		ch <- d
	}
}

func (cc connCollector) Collect(ch chan<- prometheus.Metric) {
	for c, peer := range cc.conns.snapshot() {
		collectConn(ch, c.Stats(), peer)
	}
	for c := range cc.conns.commSnapshot() {
		st := c.Stats()
		for _, p := range st.Peers {
			if p.Conn != nil {
				collectConn(ch, *p.Conn, strconv.Itoa(p.Rank))
			}
		}
		for _, cs := range st.Collectives {
			ch <- prometheus.MustNewConstMetric(mCollCalls, prometheus.CounterValue, float64(cs.Calls), cs.Collective, cs.Algo)
			ch <- prometheus.MustNewConstMetric(mCollFailed, prometheus.CounterValue, float64(cs.Failed), cs.Collective, cs.Algo)
			ch <- prometheus.MustNewConstMetric(mCollSeconds, prometheus.CounterValue, cs.Time.Seconds(), cs.Collective, cs.Algo)
			ch <- prometheus.MustNewConstMetric(mCollBytes, prometheus.CounterValue, float64(cs.Bytes), cs.Collective, cs.Algo)
		}
	}
	for s, peer := range cc.conns.tunnelSnapshot() {
		st := s.Stats()
		ch <- prometheus.MustNewConstMetric(mTunnelOpen, prometheus.GaugeValue, float64(st.StreamsOpen), peer)
		ch <- prometheus.MustNewConstMetric(mTunnelOpened, prometheus.CounterValue, float64(st.StreamsOpened), peer)
		ch <- prometheus.MustNewConstMetric(mTunnelReset, prometheus.CounterValue, float64(st.StreamsReset), peer)
		ch <- prometheus.MustNewConstMetric(mTunnelSent, prometheus.CounterValue, float64(st.BytesSent), peer)
		ch <- prometheus.MustNewConstMetric(mTunnelRecv, prometheus.CounterValue, float64(st.BytesReceived), peer)
	}
}

// metricsServer serves /metrics for conns on addr until ctx ends or Close.
type metricsServer struct {
	addr string // the address bound (addr's port 0 resolved)
	srv  *http.Server
	done chan struct{}
}

// startMetrics listens on addr and serves the connections' metrics, with
// the Go runtime's and the process's beside them.
func startMetrics(addr string, conns *metricsConns, log *slog.Logger) (*metricsServer, error) {
	reg := newMetricsRegistry(conns)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slogPromLogger{log}}))
	ms := &metricsServer{addr: ln.Addr().String(), done: make(chan struct{}),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(ms.done)
		if err := ms.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server stopped", "addr", ms.addr, "err", err)
		}
	}()
	return ms, nil
}

// newMetricsRegistry registers the connections' collector and the Go
// runtime's and the process's.
func newMetricsRegistry(conns *metricsConns) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(connCollector{conns}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Close stops the server and waits for it.
func (ms *metricsServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := ms.srv.Shutdown(ctx)
	<-ms.done
	return err
}

// slogPromLogger passes promhttp's errors to slog.
type slogPromLogger struct{ log *slog.Logger }

func (l slogPromLogger) Println(v ...any) { l.log.Warn("metrics: " + fmt.Sprint(v...)) }

// parseMetricsAddr checks a --metrics value: HOST:PORT or :PORT, or "" for
// none.
func parseMetricsAddr(addr string) error {
	if addr == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return usagef("--metrics %q: want HOST:PORT or :PORT", addr)
	}
	return nil
}

// collectConn reports one connection's telemetry under peer.
func collectConn(ch chan<- prometheus.Metric, st multirail.Stats, peer string) {
	counter := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	for _, r := range st.Rails {
		up := 0.0
		if r.Up {
			up = 1
		}
		counter(mRailSentBytes, r.BytesSent, peer, r.Name)
		counter(mRailRecvBytes, r.BytesReceived, peer, r.Name)
		counter(mRailSentSegs, r.SegmentsSent, peer, r.Name)
		counter(mRailRecvSegs, r.SegmentsReceived, peer, r.Name)
		counter(mRailResent, r.Resent, peer, r.Name)
		gauge(mRailUp, up, peer, r.Name)
		counter(mRailRejoins, r.Rejoins, peer, r.Name)
		for i, n := range r.ErrorsByReason {
			counter(mRailErrors, n, peer, r.Name, multirail.ErrorReasons[i])
		}
		gauge(mRailQueue, float64(r.Queued), peer, r.Name)
		gauge(mRailQueueBytes, float64(r.QueuedBytes), peer, r.Name)
		gauge(mRailQueueDelay, r.LastWait.Seconds(), peer, r.Name)
		gauge(mRailInFlight, float64(r.InFlight), peer, r.Name)
		gauge(mRailDrain, r.RateBps/8, peer, r.Name)
		gauge(mRailAckDelay, r.AckDelay.Seconds(), peer, r.Name)
		gauge(mSchedShare, r.RecentShare, peer, r.Name)
	}
	counter(mSchedDecisions, st.Scheduler.Decisions, peer)
	counter(mMessagesSent, st.MessagesSent, peer)
	counter(mMessagesRecv, st.MessagesReceived, peer)
	if s := st.Stages; s != nil {
		gauge(mStageDiscard, s.Rate, peer)
		counter(mStagePacketsSent, s.PacketsSent, peer)
		counter(mStagePacketsDrop, s.PacketsDropped, peer)
	}
}

// MetricsAddrEnv names the address at which every rank of a communicator
// program (osu, train --per-process) serves its metrics: HOST:PORT, the
// port offset by the rank's local rank, so that ranks sharing a host do
// not collide.
const MetricsAddrEnv = "MULTIRAIL_METRICS_ADDR"

// rankMetricsAddr offsets addr's port by localRank.
func rankMetricsAddr(addr string, localRank int) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil || p < 0 || p+localRank > 65535 || (p == 0 && localRank > 0) {
		return "", usagef("%s=%q: want HOST:PORT or :PORT with PORT+local rank (%d) at most 65535", MetricsAddrEnv, addr, localRank)
	}
	if p == 0 {
		return addr, nil
	}
	return net.JoinHostPort(host, strconv.Itoa(p+localRank)), nil
}

// serveCommMetrics serves c's metrics when addr (--metrics, else
// MULTIRAIL_METRICS_ADDR) is set, at its port plus c's local rank. stop is
// never nil.
func serveCommMetrics(g *globals, c *comm.Comm, addr string) (stop func(), err error) {
	if addr == "" {
		addr = os.Getenv(MetricsAddrEnv)
	}
	if addr == "" {
		return func() {}, nil
	}
	a, err := rankMetricsAddr(addr, c.LocalRank())
	if err != nil {
		return nil, err
	}
	var conns metricsConns
	conns.addComm(c)
	ms, err := startMetrics(a, &conns, g.logger())
	if err != nil {
		return nil, err
	}
	g.logger().Info("metrics", "rank", c.Rank(), "url", "http://"+ms.addr+"/metrics")
	return func() { _ = ms.Close() }, nil
}

// startMetricsFlag starts --metrics when set; stop is never nil.
func startMetricsFlag(g *globals, addr string, conns *metricsConns) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ms, err := startMetrics(addr, conns, g.logger())
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(g.stderr, "multirail: metrics on http://%s/metrics\n", ms.addr)
	return func() { _ = ms.Close() }, nil
}
