package sandbox

import (
	"strconv"
	"strings"
)

// Resources are what a sandbox's environment had: the limits that bound
// it and the image it ran on. A run records them (the manifest, the
// report) so that a resume or a comparison under other resources is seen:
// a memory limit alone moves pass rates by points.
type Resources struct {
	CPUs        float64
	MemoryBytes int64
	Pids        int64
	DiskBytes   int64
	Image       string // Spec.Image, as named
	// ImageDigest is what Image resolved to when the environment was
	// provisioned ([driver.ImageDigester]); empty where the driver has
	// no images or does not say.
	ImageDigest string
}

// SpecResources are the resources spec asks for; the digest is known
// only once provisioned ([Sandbox.Resources]).
func SpecResources(spec Spec) Resources {
	l := spec.Limits
	return Resources{CPUs: l.CPUs, MemoryBytes: l.MemoryBytes, Pids: l.Pids, DiskBytes: l.DiskBytes, Image: spec.Image}
}

// Resources are the resources of s's environment.
func (s *Sandbox) Resources() Resources {
	r := SpecResources(Spec{Limits: s.limits, Image: s.image})
	r.ImageDigest = s.digest
	return r
}

// String is r in its canonical form, what manifests and records hold:
// the fields set, in this order, as "cpus=2 memory=2147483648 pids=512
// disk=1073741824 image=python:3.12 digest=sha256:…" (bytes in bytes), or
// "unlimited" for no limit and no image.
func (r Resources) String() string {
	var b strings.Builder
	add := func(k, v string) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + v)
	}
	if r.CPUs > 0 {
		add("cpus", strconv.FormatFloat(r.CPUs, 'g', -1, 64))
	}
	for _, f := range [...]struct {
		k string
		v int64
	}{{"memory", r.MemoryBytes}, {"pids", r.Pids}, {"disk", r.DiskBytes}} {
		if f.v > 0 {
			add(f.k, strconv.FormatInt(f.v, 10))
		}
	}
	if r.Image != "" {
		add("image", r.Image)
	}
	if r.ImageDigest != "" {
		add("digest", r.ImageDigest)
	}
	if b.Len() == 0 {
		return "unlimited"
	}
	return b.String()
}
