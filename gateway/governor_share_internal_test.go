package gateway

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The fleet's lane: growth adds up, a cut halves it once however many
// members met the congestion, holds keep the latest, members expire.
func TestASharedLaneMergesItsMembersNews(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var s sharedLane
	s = s.merge(laneNews{window: 16}, "a", t0, 1024)
	require.Equal(t, 16.0, s.Window, "a new lane takes its first member's window")
	s = s.merge(laneNews{window: 40, grow: 2}, "b", t0, 1024)
	require.Equal(t, 18.0, s.Window, "the lane's window, not b's, grown by b's growth")
	require.Len(t, s.Members, 2)

	s = s.merge(laneNews{cut: true, holdUntil: t0.Add(3 * time.Second)}, "a", t0.Add(time.Second), 1024)
	s = s.merge(laneNews{cut: true, holdUntil: t0.Add(2 * time.Second)}, "b", t0.Add(1500*time.Millisecond), 1024)
	require.Equal(t, 9.0, s.Window, "two members met one congestion: one cut")
	require.Equal(t, t0.Add(3*time.Second), s.HoldUntil)
	s = s.merge(laneNews{cut: true}, "b", t0.Add(2*time.Second), 1024)
	require.Equal(t, 4.5, s.Window, "a congestion a guard later cuts again")

	s = s.merge(laneNews{rate: 20, capacity: 20}, "a", t0.Add(2*time.Second+memberTTL), 1024)
	require.Equal(t, map[string]time.Time{"a": t0.Add(2*time.Second + memberTTL)}, s.Members, "b left: its last update is memberTTL old")
	require.Equal(t, [2]float64{20, 20}, [2]float64{s.Rate, s.Capacity})

	b, err := json.Marshal(s)
	require.NoError(t, err)
	back, err := decodeSharedLane(b)
	require.NoError(t, err)
	require.Equal(t, s.Window, back.Window)
	require.True(t, s.HoldUntil.Equal(back.HoldUntil))
}

// FuzzSharedLane reads arbitrary values as a lane another process stored:
// an error or a lane whose merge is a usable limit, never a panic.
func FuzzSharedLane(f *testing.F) {
	f.Add([]byte(`{"window":18,"cut_at":"2026-11-28T12:00:01Z","hold_until":"2026-11-28T12:00:03Z","rate":20,"capacity":20,"members":{"a":"2026-11-28T12:00:00Z"}}`))
	f.Add([]byte(`{"window":-1}`))
	f.Add([]byte(`{"window":1e308,"rate":1e400}`))
	f.Add([]byte(`{"members":{"a":"not a time"}}`))
	f.Add([]byte(`null`))
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSharedLane(b)
		if err != nil {
			return
		}
		m := s.merge(laneNews{window: 16, grow: 1, cut: true}, "me", now, 1024)
		if !(m.Window >= 1 && m.Window <= 1024) || len(m.Members) < 1 || len(m.Members) > maxMembers {
			t.Fatalf("merged %+v from %q", m, b)
		}
	})
}
