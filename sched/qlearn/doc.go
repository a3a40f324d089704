// Package qlearn is the learning segment scheduler of CN101833479A
// ("qlearn-patent") and an improved preset ("qlearn"). Importing the
// package registers both in the sched registry.
package qlearn
