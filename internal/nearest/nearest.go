// Package nearest finds the name someone probably meant when they wrote one
// that is not known ("postgress", "keyId", "workrs"), for the "did you
// mean" of an error. It imports nothing of oncepush.
package nearest

import "strings"

// Name returns the name of known nearest to word, and true, when one is
// near enough to have been meant: the same but for the case of its
// letters, or at most two edits away (a letter added, dropped, changed, or
// two neighbours swapped) and fewer than half of word's letters. Of
// several as near, the first in known wins.
func Name(word string, known []string) (string, bool) {
	best, bestDist := "", -1
	lw := strings.ToLower(word)
	for _, k := range known {
		if k == word {
			continue
		}
		if strings.EqualFold(k, word) {
			return k, true
		}
		d := distance(lw, strings.ToLower(k))
		if d <= 2 && 2*d < len([]rune(word)) && (bestDist < 0 || d < bestDist) {
			best, bestDist = k, d
		}
	}
	return best, bestDist >= 0
}

// distance is the optimal string alignment distance between a and b, in
// runes: the edits of Levenshtein's distance plus the swap of two
// neighbours, the commonest typing slip.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows of the table: two back (for a swap), the last, this one.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
