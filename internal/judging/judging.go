// Package judging is how the engine tells an episode that its judge's
// part has begun: usage recorded from then on is the judge's. It is
// internal so that no harness or judge can move that line. Package
// harness, the only code that reaches an episode's state, installs the
// functions when it is loaded: an init-time hook, where the style is
// otherwise to avoid registration through init, because the alternative
// is an exported method any harness author could call.
package judging

// Start marks ep, a *harness.Episode, as judging; Started reports whether
// it is. Both are set by package harness, which every caller imports.
var (
	Start   func(ep any)
	Started func(ep any) bool
)

// Called counts a call of the judge stage at path (judgestages) on ep,
// which gave a verdict or not; Stages returns ep's counts in a record's
// judge_stages form, "" when its judge has no stages. Set by package
// harness.
var (
	Called func(ep any, path string, verdict bool)
	Stages func(ep any) string
)
