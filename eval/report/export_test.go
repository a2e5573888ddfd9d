package report

// NaturalCompare exposes naturalCompare to the external tests.
var NaturalCompare = naturalCompare
