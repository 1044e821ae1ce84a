// A small Go service for stacklens's capture tests: it exposes net/http/pprof and keeps
// busy in recognisable functions (CPU, allocations, blocked goroutines, lock contention).
// GET /ready answers 200 once every one of them has done enough work to show in its
// profile (so tests poll for it instead of sleeping), 503 before.
//
// GOSERVICE_SLOW=allocate injects a slowdown for the gate's tests: allocate then also
// writes over each buffer it allocates, in its own loop (its flat CPU time grows).
// GOSERVICE_SLOW_PERCENT=N (scripts/gate-fpr.sh) makes allocate write over its buffers
// for N % of the time the service has run instead: extra work of N % of burnCPU's core,
// about N % of the service's CPU time. Unset, nothing changes.
package main

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

var sink [][]byte

// Work done so far by each busy function.
var cpuRounds, allocations, lockHolds atomic.Int64

// burnCPU is the hot function a CPU capture must find.
func burnCPU() {
	buf := make([]byte, 4096)
	for {
		for i := 0; i < 2000; i++ {
			s := sha256.Sum256(buf)
			buf[0] = s[0]
		}
		cpuRounds.Add(1)
		runtime.Gosched()
	}
}

// slowAllocate: GOSERVICE_SLOW=allocate.
var slowAllocate bool

// slowPercent: GOSERVICE_SLOW_PERCENT.
var slowPercent int64

// allocate keeps allocating and holds on to part of it.
func allocate() {
	started := time.Now()
	var extra time.Duration
	for i := 0; ; i++ {
		b := make([]byte, 64<<10)
		if slowAllocate {
			for pass := 0; pass < 8; pass++ {
				for j := range b {
					b[j] += byte(j + pass)
				}
			}
		}
		// Catch up with slowPercent % of the time since the start.
		for due := time.Since(started) * time.Duration(slowPercent) / 100; extra < due; {
			pass := time.Now()
			for j := range b {
				b[j] += byte(j)
			}
			extra += time.Since(pass)
		}
		if i%16 == 0 {
			sink = append(sink, b)
			if len(sink) > 64 {
				sink = sink[1:]
			}
		}
		allocations.Add(1)
		time.Sleep(time.Millisecond)
	}
}

// waitForever blocks on a channel nobody sends to (a goroutine leak).
func waitForever(ch chan int) { <-ch }

// contend fights over one mutex.
func contend(mu *sync.Mutex) {
	for {
		mu.Lock()
		time.Sleep(200 * time.Microsecond)
		mu.Unlock()
		lockHolds.Add(1)
	}
}

// ready: CPU burnt, allocations kept across a few collections (the heap profile shows
// the state as of the last completed GC), and the mutex contended many times.
func ready(w http.ResponseWriter, _ *http.Request) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if cpuRounds.Load() >= 5 && allocations.Load() >= 64 && m.NumGC >= 3 && lockHolds.Load() >= 50 {
		fmt.Fprintln(w, "ready")
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
}

func main() {
	switch slow := os.Getenv("GOSERVICE_SLOW"); slow {
	case "":
	case "allocate":
		slowAllocate = true
	default:
		fmt.Fprintf(os.Stderr, "GOSERVICE_SLOW=%q: the only slowdown is \"allocate\"\n", slow)
		os.Exit(2)
	}
	if percent := os.Getenv("GOSERVICE_SLOW_PERCENT"); percent != "" {
		if _, err := fmt.Sscan(percent, &slowPercent); err != nil || slowPercent < 0 {
			fmt.Fprintf(os.Stderr, "GOSERVICE_SLOW_PERCENT=%q: not a percentage\n", percent)
			os.Exit(2)
		}
	}
	runtime.SetBlockProfileRate(1)
	runtime.SetMutexProfileFraction(1)
	go burnCPU()
	go allocate()
	ch := make(chan int)
	for i := 0; i < 25; i++ {
		go waitForever(ch)
	}
	var mu sync.Mutex
	for i := 0; i < 4; i++ {
		go contend(&mu)
	}
	http.HandleFunc("/ready", ready)
	addr := os.Args[1]
	fmt.Println("listening on", addr)
	if err := http.ListenAndServe(addr, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
