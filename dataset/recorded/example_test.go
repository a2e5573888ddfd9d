package recorded_test

import (
	"fmt"

	"github.com/proctor-evals/proctor/dataset/recorded"
)

func ExampleCase_SampleID() {
	c := recorded.Case{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"}
	fmt.Println(c.SampleID())
	c.SpanID = ""
	fmt.Println(c.SampleID())
	// Output:
	// 4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7
	// 4bf92f3577b34da6a3ce929d0e0e4736
}
