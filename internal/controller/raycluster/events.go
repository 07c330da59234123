package raycluster

// emit sends the queued events, leaving out those identical to one sent within shared.EventRepeatWindow.
func (r *Reconciler) emit(s *state) {
	r.Events.Emit(s.rc, r.now().Time, s.events...)
	s.events = nil
}
