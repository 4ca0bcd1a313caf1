package timesource_test

import (
	"testing"
	"time"

	"github.com/oncepush/oncepush/provider/internal/timesource"
	"github.com/oncepush/oncepush/pushtest"
)

func TestOwnClockWinsThenClientsThenWall(t *testing.T) {
	t.Parallel()
	own := pushtest.NewClock(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	client := pushtest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))

	s := timesource.New(own)
	s.Use(client)
	if got := s.Now(); !got.Equal(own.Now()) {
		t.Errorf("with a clock of its own: %v, want %v", got, own.Now())
	}

	s = timesource.New(nil)
	before := time.Now()
	if got := s.Now(); got.Before(before) || got.After(time.Now()) {
		t.Errorf("with no clock: %v, want the wall clock", got)
	}
	s.Use(client)
	s.Use(nil)
	if got := s.Now(); !got.Equal(client.Now()) {
		t.Errorf("handed the client's clock: %v, want %v", got, client.Now())
	}
	client.Advance(time.Hour)
	if got := s.Now(); !got.Equal(client.Now()) {
		t.Errorf("after the client's clock moved: %v, want %v", got, client.Now())
	}
}
