package raycronjob

import (
	"time"

	"github.com/robfig/cron/v3"
)

// maxCounted bounds how many missed schedule times are counted one by one; beyond it the count is "at least".
const maxCounted = 10000

// Due is what a schedule asks for at a moment, given the last time it ran.
type Due struct {
	// Time is the latest schedule time after the last run and not after now; zero when none has come.
	Time time.Time
	// Missed counts the schedule times after the last run before Time (at most maxCounted; Capped when
	// there were more).
	Missed int
	Capped bool
	// Next is the first schedule time after now; zero when the schedule has no later time.
	Next time.Time
}

// due returns what s asks for at now when it last ran at since. Only the latest schedule time passed is
// due: earlier ones were missed, as Kubernetes' CronJob starts only the most recent missed time.
func due(s cron.Schedule, since, now time.Time) Due {
	var d Due
	first := s.Next(since)
	if first.IsZero() || first.After(now) {
		d.Next = first
		return d
	}
	n := 0
	var last time.Time
	for t := first; !t.IsZero() && !t.After(now); t = s.Next(t) {
		if n == maxCounted {
			d.Capped = true
			last = latest(s, t, now)
			break
		}
		last, n = t, n+1
	}
	d.Time, d.Missed = last, n-1
	if d.Capped {
		d.Missed = n
	}
	d.Next = s.Next(now)
	return d
}

// latest returns the last time of s in (from, now], from being a time of s not after now: it looks back
// from now over windows that double from a minute, so that it walks only a few times of s.
func latest(s cron.Schedule, from, now time.Time) time.Time {
	for w := time.Minute; ; w *= 2 {
		start := now.Add(-w)
		if !start.After(from) {
			start = from
		}
		var last time.Time
		for t := s.Next(start); !t.IsZero() && !t.After(now); t = s.Next(t) {
			last = t
		}
		if !last.IsZero() || start.Equal(from) {
			if last.IsZero() {
				return from
			}
			return last
		}
	}
}
