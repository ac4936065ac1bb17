// Command racer has a data race, for testkit's test that a race in a child
// fails the test that started it.
package main

import "fmt"

func main() {
	n := 0
	done := make(chan struct{})
	go func() {
		n++ // races with the write below
		close(done)
	}()
	n++
	<-done
	fmt.Println(n)
}
