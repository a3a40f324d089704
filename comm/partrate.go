package comm

import "sort"

// PartRates spreads a ring allreduce stage's discard rate r over its
// 2(n-1) parts (hops) where discarding costs least, and returns each
// part's rate; their mean is r as long as r <= limit.
//
// A packet discarded in reduce-scatter hop k loses the k+1 contributions
// its partial sum carries, from every rank's result: cost (k+1)n. One
// discarded in allgather hop k leaves its receiver, and the n-2-k ranks
// after it, with a partial sum of k+1 contributions instead of n: cost
// (n-1-k)^2. The rate goes to the cheapest parts first (equal costs share
// alike), none above limit, so that every part still sends most of its
// packets' worth of information where it matters.
func PartRates(n int, r, limit float64) []float64 {
	parts := 2 * (n - 1)
	out := make([]float64, parts)
	if parts == 0 || !(r > 0) {
		return out
	}
	cost := make([]int, parts)
	for k := 0; k < n-1; k++ {
		cost[k] = (k + 1) * n
		cost[n-1+k] = (n - 1 - k) * (n - 1 - k)
	}
	order := make([]int, parts)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return cost[order[a]] < cost[order[b]] })
	budget := r * float64(parts)
	for i := 0; i < parts && budget > 0; {
		j := i
		for j < parts && cost[order[j]] == cost[order[i]] {
			j++
		}
		share := min(limit, budget/float64(j-i))
		for _, p := range order[i:j] {
			out[p] = share
		}
		budget -= share * float64(j-i)
		i = j
	}
	return out
}
