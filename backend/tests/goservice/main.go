// A small Go service for stacklens's capture tests: it exposes net/http/pprof and keeps
// busy in recognisable functions (CPU, allocations, blocked goroutines, lock contention).
package main

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"sync"
	"time"
)

var sink [][]byte

// burnCPU is the hot function a CPU capture must find.
func burnCPU() {
	buf := make([]byte, 4096)
	for {
		for i := 0; i < 2000; i++ {
			s := sha256.Sum256(buf)
			buf[0] = s[0]
		}
		runtime.Gosched()
	}
}

// allocate keeps allocating and holds on to part of it.
func allocate() {
	for i := 0; ; i++ {
		b := make([]byte, 64<<10)
		if i%16 == 0 {
			sink = append(sink, b)
			if len(sink) > 64 {
				sink = sink[1:]
			}
		}
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
	}
}

func main() {
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
	addr := os.Args[1]
	fmt.Println("listening on", addr)
	if err := http.ListenAndServe(addr, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
