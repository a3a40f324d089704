package fifo

import (
	"testing"

	"pgregory.net/rapid"
)

func TestQueueTable(t *testing.T) {
	var q Queue[int]
	if q.Len() != 0 {
		t.Fatalf("zero queue has length %d", q.Len())
	}
	for i := range 10 {
		q.Push(i)
	}
	if got := q.Front(); got != 0 {
		t.Fatalf("front %d, want 0", got)
	}
	if got := q.At(9); got != 9 {
		t.Fatalf("At(9) = %d, want 9", got)
	}
	for i := range 5 {
		if got := q.Pop(); got != i {
			t.Fatalf("pop %d, want %d", got, i)
		}
	}
	*q.FrontPtr() = 50
	got := q.Drain(nil)
	want := []int{50, 6, 7, 8, 9}
	if len(got) != len(want) {
		t.Fatalf("drain %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("drain %v, want %v", got, want)
		}
	}
	if q.Len() != 0 {
		t.Fatalf("length %d after drain", q.Len())
	}
}

// TestPopClears checks that a popped slot keeps no reference.
func TestPopClears(t *testing.T) {
	var q Queue[*int]
	x := 1
	q.Push(&x)
	q.Pop()
	for _, p := range q.buf {
		if p != nil {
			t.Fatal("a popped pointer is still referenced by the ring")
		}
	}
}

// TestQueueModel checks Queue against a slice under random pushes, pops,
// peeks and drains.
func TestQueueModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var q Queue[int]
		var model []int
		next := 0
		t.Repeat(map[string]func(*rapid.T){
			"push": func(t *rapid.T) {
				n := rapid.IntRange(1, 20).Draw(t, "n")
				for range n {
					q.Push(next)
					model = append(model, next)
					next++
				}
			},
			"pop": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				if got := q.Pop(); got != model[0] {
					t.Fatalf("pop %d, want %d", got, model[0])
				}
				model = model[1:]
			},
			"popBack": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				if got, want := q.Back(), model[len(model)-1]; got != want {
					t.Fatalf("Back %d, want %d", got, want)
				}
				if got, want := q.PopBack(), model[len(model)-1]; got != want {
					t.Fatalf("PopBack %d, want %d", got, want)
				}
				model = model[:len(model)-1]
			},
			"at": func(t *rapid.T) {
				if len(model) == 0 {
					t.Skip("empty")
				}
				i := rapid.IntRange(0, len(model)-1).Draw(t, "i")
				if got := q.At(i); got != model[i] {
					t.Fatalf("At(%d) = %d, want %d", i, got, model[i])
				}
			},
			"drain": func(t *rapid.T) {
				got := q.Drain(nil)
				if len(got) != len(model) {
					t.Fatalf("drained %d, want %d", len(got), len(model))
				}
				for i := range got {
					if got[i] != model[i] {
						t.Fatalf("drained %v, want %v", got, model)
					}
				}
				model = nil
			},
			"": func(t *rapid.T) {
				if q.Len() != len(model) {
					t.Fatalf("length %d, want %d", q.Len(), len(model))
				}
			},
		})
	})
}

// TestBounded: a queue pushed and popped for ever without draining keeps
// its buffer at the smallest power of two that holds its length.
func TestBounded(t *testing.T) {
	var q Queue[int]
	for i := range 10 {
		q.Push(i)
	}
	for i := range 100000 {
		q.Push(i)
		q.Pop()
	}
	if q.Len() != 10 || len(q.buf) != 16 {
		t.Fatalf("length %d, buffer %d; want 10 in 16", q.Len(), len(q.buf))
	}
}
