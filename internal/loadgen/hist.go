package loadgen

import (
	"math/bits"
	"sync"
	"time"
)

// subBits is log2 of the sub-buckets per power of two: 64 of them, so a
// recorded value is known to within 1/64 (1.6%).
const subBits = 6

const (
	subCount = 1 << subBits
	// maxBuckets covers values up to 2^(40+subBits) ns, far past any latency
	// worth recording; larger values land in the last bucket.
	maxBuckets = (40 + 1) * subCount
)

// histogram is a fixed-size log-linear histogram of durations (nanoseconds).
// It is not safe for concurrent use: each goroutine records into its own and
// they are merged once the goroutines are done.
type histogram struct {
	counts [maxBuckets]int64
	total  int64
	max    int64
}

func bucketOf(v int64) int {
	if v < subCount {
		return int(max(v, 0))
	}
	shift := bits.Len64(uint64(v)) - subBits - 1
	i := (shift+1)*subCount + int(v>>shift) - subCount
	return min(i, maxBuckets-1)
}

// lowOf is the smallest value of bucket i, and widthOf its width.
func lowOf(i int) int64 {
	if i < subCount {
		return int64(i)
	}
	shift := i/subCount - 1
	return int64(subCount+i%subCount) << shift
}

func widthOf(i int) int64 {
	if i < subCount {
		return 1
	}
	return int64(1) << (i/subCount - 1)
}

func (h *histogram) record(d time.Duration) {
	v := int64(d)
	h.counts[bucketOf(v)]++
	h.total++
	h.max = max(h.max, v)
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.max = max(h.max, o.max)
}

// quantile returns the value at quantile q (0..1): the middle of the bucket
// holding the ceil(q·n)-th smallest value, never more than the maximum seen.
func (h *histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := int64(q * float64(h.total))
	if float64(rank) < q*float64(h.total) {
		rank++
	}
	rank = max(rank, 1)
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(lowOf(i)+widthOf(i)/2, h.max))
		}
	}
	return time.Duration(h.max)
}

// latencies is a histogram that many goroutines record into: each records
// into the shard of its own index, under that shard's lock.
type latencies struct {
	shards [32]struct {
		mu sync.Mutex
		h  histogram
	}
}

func (l *latencies) record(i int, d time.Duration) {
	s := &l.shards[i%len(l.shards)]
	s.mu.Lock()
	s.h.record(d)
	s.mu.Unlock()
}

// merged returns the shards' sum.
func (l *latencies) merged() *histogram {
	var h histogram
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		h.merge(&s.h)
		s.mu.Unlock()
	}
	return &h
}
