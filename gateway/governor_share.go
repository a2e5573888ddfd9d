package gateway

import "time"

// LimitShare is how processes that govern the same keys share their lanes
// (package cluster's, through a distributed run's JetStream).
type LimitShare interface{}

// laneShare is a lane's side of a LimitShare; nil when not shared.
type laneShare struct{}

func (l *lane) startSharing()         {}
func (s *laneShare) cut()             {}
func (s *laneShare) grow(float64)     {}
func (s *laneShare) hold(_ time.Time) {}
