// symwork in Go: methods, closures, maps and small functions the compiler inlines, so
// that symbolization meets Go's names and its inline tree; stripped with -s -w it keeps
// only .gopclntab.
package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
)

type block struct{ words []uint32 }

func rotateLeft(x uint32, r uint) uint32 { return x<<r | x>>(32-r) }

func mix(h, k uint32) uint32 {
	k *= 0xcc9e2d51
	k = rotateLeft(k, 15)
	k *= 0x1b873593
	h ^= k
	return rotateLeft(h, 13)*5 + 0xe6546b64
}

//go:noinline
func (b *block) hash(seed uint32) uint32 {
	h := seed
	for _, w := range b.words {
		h = mix(h, w)
	}
	return h
}

func curve(x float64) float64 { return ((0.5*x-1.5)*x + 2.0) * x / (1.0 + x*x) }

//go:noinline
func integrate(from, to float64, steps int) float64 {
	width := (to - from) / float64(steps)
	sum := 0.0
	for i := 0; i < steps; i++ {
		sum += curve(from + (float64(i)+0.5)*width)
	}
	return sum * width
}

//go:noinline
func countKeys(keys []int) int {
	counts := map[int]int{}
	for _, k := range keys {
		counts[k%4099]++
	}
	return len(counts)
}

//go:noinline
func sortedMedian(values []int) int {
	sorted := append([]int(nil), values...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i]%1000 < sorted[j]%1000 })
	return sorted[len(sorted)/2]
}

func main() {
	rounds := 20
	if len(os.Args) > 1 {
		rounds, _ = strconv.Atoi(os.Args[1])
	}
	b := &block{words: make([]uint32, 1<<16)}
	keys := make([]int, 50000)
	for i := range b.words {
		b.words[i] = uint32(i) * 2654435761
	}
	for i := range keys {
		keys[i] = i * 7919
	}
	var hash uint32
	area, distinct, median := 0.0, 0, 0
	for r := 0; r < rounds; r++ {
		hash ^= b.hash(uint32(r))
		area += integrate(0, 4+float64(r), 200000)
		distinct += countKeys(keys)
		median += sortedMedian(keys[:20000])
	}
	fmt.Printf("%08x %.3f %d %d\n", hash, area, distinct, median)
}
