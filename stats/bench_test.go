package stats_test

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/proctor-evals/proctor/stats"
)

// BenchmarkBootstrapClusters: 1,000 resamples over 100,000 clusters (1M
// episodes: 100k samples × 10 epochs), the report's workload (P7).
func BenchmarkBootstrapClusters(b *testing.B) {
	sums, counts := clusteredData(100_000, 10, 1)
	b.ReportAllocs()
	for b.Loop() {
		stats.BootstrapClusters(sums, counts, 1000, 0.95, 1)
	}
}

// BenchmarkClusteredMean: mean and clustered SE of 1M records in 100k
// clusters, from the per-cluster totals an incremental aggregator keeps.
func BenchmarkClusteredMean(b *testing.B) {
	sums, counts := clusteredData(100_000, 10, 1)
	b.ReportAllocs()
	for b.Loop() {
		stats.ClusteredMean(sums, counts, true)
	}
}

// BenchmarkClusteredSE: the same from 1M raw scores and string cluster
// IDs, grouping included.
func BenchmarkClusteredSE(b *testing.B) {
	const clusters, epochs = 100_000, 10
	rng := rand.New(rand.NewPCG(1, 1))
	scores := make([]float64, 0, clusters*epochs)
	ids := make([]string, 0, clusters*epochs)
	names := make([]string, clusters)
	for c := range names {
		names[c] = "sample-" + strconv.Itoa(c)
	}
	for e := 0; e < epochs; e++ {
		for c := range clusters {
			scores = append(scores, float64(rng.IntN(2)))
			ids = append(ids, names[c])
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		stats.ClusteredSE(scores, ids)
	}
}

// The confidence sequences' cost per observation: O(1) for PrPl-EB and
// the betting test at one mean, O(grid) for the betting sequence.
func BenchmarkConfidenceSequenceAdd(b *testing.B) {
	x := make([]float64, 1024)
	r := rand.New(rand.NewPCG(1, 1))
	for i := range x {
		if r.Float64() < 0.7 {
			x[i] = 1
		}
	}
	b.Run("empirical-bernstein", func(b *testing.B) {
		s := stats.NewEmpiricalBernstein(0.05)
		for i := range b.N {
			s.Add(x[i%len(x)])
		}
	})
	b.Run("betting-test", func(b *testing.B) {
		s := stats.NewBettingTest(0.7, 0.05)
		for i := range b.N {
			s.Add(x[i%len(x)])
		}
	})
	for _, grid := range []int{100, 1000} {
		b.Run("betting-grid-"+strconv.Itoa(grid), func(b *testing.B) {
			s := stats.NewBetting(0.05, grid)
			for i := range b.N {
				s.Add(x[i%len(x)])
			}
		})
	}
}
