package raycronjob

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

func mustParse(t *testing.T, spec string) cron.Schedule {
	t.Helper()
	s, err := cron.ParseStandard(spec)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDue(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(h, m, s int) time.Time {
		return t0.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second)
	}
	tests := []struct {
		name       string
		schedule   string
		since, now time.Time
		want       Due
	}{
		{"first time passed", "*/5 * * * *", t0, at(0, 5, 30), Due{Time: at(0, 5, 0), Next: at(0, 10, 0)}},
		{"none yet", "*/5 * * * *", t0, at(0, 3, 0), Due{Next: at(0, 5, 0)}},
		{"exactly on a time", "*/5 * * * *", t0, at(0, 5, 0), Due{Time: at(0, 5, 0), Next: at(0, 10, 0)}},
		{"a time equal to the last run is not due again", "*/5 * * * *", at(0, 5, 0), at(0, 5, 0), Due{Next: at(0, 10, 0)}},
		{"two missed, the latest due", "*/5 * * * *", t0, at(0, 17, 0), Due{Time: at(0, 15, 0), Missed: 2, Next: at(0, 20, 0)}},
		{"operator stopped for three minutes", "* * * * *", at(0, 1, 0), at(0, 4, 10), Due{Time: at(0, 4, 0), Missed: 2, Next: at(0, 5, 0)}},
		{"never fires", "0 0 30 2 *", t0, at(3, 0, 0), Due{}},
		{"every second for ten hours: counted up to the bound", "@every 1s", t0, at(10, 0, 0), Due{Time: at(10, 0, 0), Missed: maxCounted, Capped: true, Next: at(10, 0, 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := due(mustParse(t, tt.schedule), tt.since, tt.now); got != tt.want {
				t.Errorf("due = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDueReadsTheScheduleInItsTimeZone(t *testing.T) {
	// 09:00 in Taipei is 01:00 UTC.
	s := mustParse(t, "TZ=Asia/Taipei 0 9 * * *")
	since := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	got := due(s, since, time.Date(2024, 1, 1, 1, 30, 0, 0, time.UTC))
	if want := time.Date(2024, 1, 1, 1, 0, 0, 0, time.UTC); !got.Time.Equal(want) || got.Missed != 0 {
		t.Errorf("due = %+v, want the time %s and none missed", got, want)
	}
}

func TestLatestLooksBackFromNow(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		schedule  string
		from, now time.Time
		want      time.Time
	}{
		{"* * * * *", t0, t0.Add(72*time.Hour + 30*time.Second), t0.Add(72 * time.Hour)},
		{"0 0 1 * *", t0, t0.Add(40 * 24 * time.Hour), time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC)},
		{"0 0 1 1 *", t0, t0.Add(24 * time.Hour), t0}, // no later time: from itself
	} {
		if got := latest(mustParse(t, tt.schedule), tt.from, tt.now); !got.Equal(tt.want) {
			t.Errorf("latest(%q, %s, %s) = %s, want %s", tt.schedule, tt.from, tt.now, got, tt.want)
		}
	}
}
