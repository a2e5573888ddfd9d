package view

import (
	"github.com/proctor-evals/proctor/eval/manifest"
	"github.com/proctor-evals/proctor/history"
)

// shardLink is one shard log of a run the runs list shows as one.
type shardLink struct{ ID, URL, Shard string }

// joinShards replaces the snapshots of the shard logs of one run with one
// snapshot of the run (history.Group, as the history page and `proctor
// history` join them): its report read from every shard's log, its start
// the earliest, its size the sum. It returns the snapshots and, for each
// joined run, the links to its shards.
func (s *Server) joinShards(snaps []*snapshot) ([]*snapshot, map[*snapshot][]shardLink) {
	var runs []*history.Run
	of := map[*history.Run]*snapshot{}
	for _, snap := range snaps {
		if snap.Err != nil || snap.Report == nil || snap.Report.Episodes == 0 {
			continue
		}
		m, err := manifest.Read(snap.Path)
		if err != nil || m.Shard == "" {
			continue // not a shard (or a broken manifest): the log stands alone
		}
		run := history.FromReport(snap.Report, m)
		run.Log, run.Start = snap.Path, snap.Ext.first
		runs = append(runs, run)
		of[run] = snap
	}
	if len(runs) < 2 {
		return snaps, nil
	}
	history.Sort(runs)
	drop := map[*snapshot]bool{}
	joined := map[*snapshot]*snapshot{}
	links := map[*snapshot][]shardLink{}
	for _, r := range history.Group(runs) {
		if len(r.Parts) < 2 {
			continue
		}
		rep, err := history.ReadReport(r, s.opts.Report)
		if err != nil {
			continue // each shard is listed as it is
		}
		first := of[r.Parts[0]]
		run := *first
		ext := *first.Ext
		ext.first = r.Start
		run.Report, run.Ext, run.Size = rep, &ext, 0
		for _, p := range r.Parts {
			ps := of[p]
			drop[ps] = true
			run.Size += ps.Size
			run.Tail += ps.Tail // writing while any shard is
			links[&run] = append(links[&run], shardLink{ID: ps.ID, URL: runURL(ps.ID), Shard: p.Shard})
		}
		joined[first] = &run
	}
	var out []*snapshot
	for _, snap := range snaps {
		switch {
		case joined[snap] != nil:
			out = append(out, joined[snap])
		case !drop[snap]:
			out = append(out, snap)
		}
	}
	return out, links
}
