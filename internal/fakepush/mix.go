package fakepush

import (
	"fmt"
	"math/rand/v2"

	"github.com/oncepush/oncepush/provider"
)

// Choice is one answer of a mix (Server.Mix), drawn with probability
// Weight / (the sum of the mix's weights).
type Choice struct {
	Weight int
	Answer Answer
}

// fakeMix draws answers at random from weighted choices.
type fakeMix struct {
	rng     *rand.Rand // guarded by the server's mutex
	choices []Choice
	total   int
}

func (m *fakeMix) draw() Answer {
	n := m.rng.IntN(m.total)
	for _, c := range m.choices {
		if n < c.Weight {
			return c.Answer
		}
		n -= c.Weight
	}
	return m.choices[len(m.choices)-1].Answer // unreachable: n < total
}

// Mix makes every request of the transport that has no program of its own
// (neither its token's nor the transport's, see Program) draw its answer from
// choices: for example 90 parts success, 5 parts 503, 3 parts dropped, 2 parts
// success after a second. A choice whose Answer has Status 0 is the
// protocol's success answer, after Answer.Latency. Draws come from a random
// source seeded with seed, so a mix draws the same sequence of answers for
// the same sequence of requests. No choices clears the mix; a weight that is
// not positive is an error.
func (s *Server) Mix(t provider.Transport, seed uint64, choices ...Choice) error {
	total := 0
	for i, c := range choices {
		if c.Weight <= 0 {
			return fmt.Errorf("pushtest: Mix: choice %d has weight %d; weights must be positive", i, c.Weight)
		}
		total += c.Weight
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(choices) == 0 {
		delete(s.mixes, t)
		return nil
	}
	s.mixes[t] = &fakeMix{
		rng:     rand.New(rand.NewPCG(seed, uint64(len(t)))),
		choices: append([]Choice(nil), choices...),
		total:   total,
	}
	return nil
}
