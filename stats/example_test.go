package stats_test

import (
	"fmt"

	"github.com/proctor-evals/proctor/stats"
)

func ExampleWilson() {
	// 8 of 10 samples passed.
	iv := stats.Wilson(8, 10, 0.95)
	fmt.Printf("%.3f %.3f\n", iv.Lo, iv.Hi)
	fmt.Println(iv)
	// Output:
	// 0.490 0.943
	// [0.490, 0.943] (95% wilson)
}

func ExamplePassAtK() {
	// A sample ran 10 epochs and passed 3 of them.
	fmt.Printf("pass@1 = %.3f\n", stats.PassAtK(10, 3, 1))
	fmt.Printf("pass@5 = %.3f\n", stats.PassAtK(10, 3, 5))
	fmt.Printf("pass^2 = %.3f\n", stats.PassHatK(10, 3, 2))
	fmt.Println(stats.PassAtK(3, 1, 5)) // fewer attempts than k
	// Output:
	// pass@1 = 0.300
	// pass@5 = 0.917
	// pass^2 = 0.067
	// NaN
}

func ExampleClusteredMean() {
	// Three samples, two epochs each: totals per sample.
	sums := []float64{2, 0, 1}
	counts := []float64{2, 2, 2}
	mean, se := stats.ClusteredMean(sums, counts, true)
	fmt.Printf("%.3f ± %.3f\n", mean, 1.96*se)
	// Output:
	// 0.500 ± 0.566
}

func ExampleSampleSize() {
	// Two runs at about 70%, correlated 0.5 per sample; detect a 5-point
	// change at α = 0.05 with 80% power.
	sd := stats.PairedSD(0.458, 0.458, 0.5)
	fmt.Println(stats.SampleSize(0.05, sd, 0.05, 0.8))
	// Output:
	// 659
}

// A gate watched after every sample: is the pass rate above 0.7? The
// betting test at level 2α errs on each side with probability at most α,
// however early it is stopped.
func ExampleBettingTest() {
	test := stats.NewBettingTest(0.7, 2*0.05)
	outcomes := []float64{1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	for i, x := range outcomes {
		test.Add(x)
		if test.Above() {
			fmt.Printf("shown above 0.7 after %d samples\n", i+1)
			return
		}
	}
	fmt.Println("undecided")
	// Output: shown above 0.7 after 30 samples
}

// The empirical-Bernstein confidence sequence narrows as observations come;
// its interval is valid at every n at once.
func ExampleEmpiricalBernstein() {
	cs := stats.NewEmpiricalBernstein(0.05)
	for i := range 1000 {
		cs.Add(float64(i % 2)) // half pass
	}
	iv := cs.Interval()
	fmt.Printf("[%.3f, %.3f] after %d\n", iv.Lo, iv.Hi, cs.N())
	// Output: [0.436, 0.562] after 1000
}
