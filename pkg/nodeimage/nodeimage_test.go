package nodeimage_test

import (
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kray-project/kray/pkg/nodeimage"
)

func TestAwaited(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	queued := func(version int64, ago time.Duration) kruisev1alpha1.NodeImageSpec {
		return kruisev1alpha1.NodeImageSpec{Images: map[string]kruisev1alpha1.ImageSpec{"rayproject/ray": {Tags: []kruisev1alpha1.ImageTagSpec{
			{Tag: "2.46.0", Version: 9},
			{Tag: "2.52.0", Version: version, CreatedAt: &metav1.Time{Time: now.Add(-ago)}},
		}}}}
	}
	reported := func(version int64, phase kruisev1alpha1.ImagePullPhase) kruisev1alpha1.NodeImageStatus {
		return kruisev1alpha1.NodeImageStatus{ImageStatuses: map[string]kruisev1alpha1.ImageStatus{"rayproject/ray": {Tags: []kruisev1alpha1.ImageTagStatus{
			{Tag: "2.46.0", Version: 9, Phase: kruisev1alpha1.ImagePhasePulling},
			{Tag: "2.52.0", Version: version, Phase: phase},
		}}}}
	}
	tests := []struct {
		name   string
		ni     *kruisev1alpha1.NodeImage
		queued bool
		want   bool
	}{
		{name: "no NodeImage: no daemon pulls there", ni: nil, queued: true, want: false},
		{name: "queued, the daemon waits", ni: &kruisev1alpha1.NodeImage{Spec: queued(2, time.Minute), Status: reported(2, kruisev1alpha1.ImagePhaseWaiting)}, want: true},
		{name: "queued, the daemon pulls", ni: &kruisev1alpha1.NodeImage{Spec: queued(2, time.Hour), Status: reported(2, kruisev1alpha1.ImagePhasePulling)}, want: true},
		{name: "queued, pulled", ni: &kruisev1alpha1.NodeImage{Spec: queued(2, time.Minute), Status: reported(2, kruisev1alpha1.ImagePhaseSucceeded)}, queued: true, want: false},
		{name: "queued, failed", ni: &kruisev1alpha1.NodeImage{Spec: queued(2, time.Minute), Status: reported(2, kruisev1alpha1.ImagePhaseFailed)}, queued: true, want: false},
		{name: "queued again: the last pull's status does not count", ni: &kruisev1alpha1.NodeImage{Spec: queued(3, 5*time.Second), Status: reported(2, kruisev1alpha1.ImagePhaseSucceeded)}, want: true},
		{name: "queued just now, not answered yet", ni: &kruisev1alpha1.NodeImage{Spec: queued(0, 5*time.Second)}, want: true},
		{name: "queued long ago and never answered: no daemon", ni: &kruisev1alpha1.NodeImage{Spec: queued(0, nodeimage.Unanswered)}, queued: true, want: false},
		{name: "queued without a time, never answered", ni: &kruisev1alpha1.NodeImage{Spec: kruisev1alpha1.NodeImageSpec{Images: map[string]kruisev1alpha1.ImageSpec{"rayproject/ray": {Tags: []kruisev1alpha1.ImageTagSpec{{Tag: "2.52.0"}}}}}}, want: false},
		{name: "not queued, a job may still queue it", ni: &kruisev1alpha1.NodeImage{}, queued: true, want: true},
		{name: "not queued, no job will", ni: &kruisev1alpha1.NodeImage{}, queued: false, want: false},
		{name: "not queued, already pulled", ni: &kruisev1alpha1.NodeImage{Status: reported(1, kruisev1alpha1.ImagePhaseSucceeded)}, queued: true, want: false},
		{name: "not queued, failed before: a job may queue it again", ni: &kruisev1alpha1.NodeImage{Status: reported(1, kruisev1alpha1.ImagePhaseFailed)}, queued: true, want: true},
		{name: "another tag of the name queued", ni: &kruisev1alpha1.NodeImage{Spec: kruisev1alpha1.NodeImageSpec{Images: map[string]kruisev1alpha1.ImageSpec{"rayproject/ray": {Tags: []kruisev1alpha1.ImageTagSpec{{Tag: "2.46.0"}}}}}}, queued: false, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nodeimage.Awaited(tt.ni, "rayproject/ray", "2.52.0", now, tt.queued); got != tt.want {
				t.Errorf("Awaited = %v, want %v", got, tt.want)
			}
		})
	}
}
