package validation

// Event reasons of the warnings that validation returns.
const (
	EventRestartPolicySubstituted = "RestartPolicySubstituted"
	EventRayContainerNotFirst     = "RayContainerNotFirst"
	EventInvalidIPPRSpec          = "InvalidIPPRSpec"
)
