package rayjob

import (
	"time"

	"k8s.io/utils/ptr"

	rayv1 "github.com/kray-project/kray/api/v1"
)

// finished cleans up after an ended RayJob: a submitter still running is deleted at once (it follows a job
// that is over, and would submit it again should the head restart); then, with the RayJobDeletionPolicy gate
// and a deletionStrategy, its rules or its onSuccess/onFailure policy; otherwise shutdownAfterJobFinishes
// deletes the cluster (or, with DeleteRayJobOnShutdown, the RayJob) ttlSecondsAfterFinished after the end.
// Nothing is done to a selected cluster.
func finished(o Observed, d *Decision) {
	job, st := o.Job, &d.Status
	if sub := o.Submitter; sub != nil && sub.DeletionTimestamp == nil && !submitterFinished(sub) {
		d.Actions = append(d.Actions, Action{Kind: DeleteSubmitter, Submitter: sub})
	}
	if selectorMode(job) || st.EndTime == nil {
		return
	}
	if ds := job.Spec.DeletionStrategy; ds != nil && o.DeletionPolicy {
		if len(ds.DeletionRules) > 0 {
			applyDeletionRules(o, d)
		} else {
			applyLegacyPolicy(o, d)
		}
		return
	}
	if !job.Spec.ShutdownAfterJobFinishes {
		return
	}
	if due := st.EndTime.Add(time.Duration(job.Spec.TTLSecondsAfterFinished) * time.Second); o.Now.Before(due) {
		d.wantRequeue(due.Sub(o.Now))
		return
	}
	if o.DeleteRayJobOnShutdown {
		deletePolicy(o, d, rayv1.DeleteSelf)
		return
	}
	deletePolicy(o, d, rayv1.DeleteCluster)
}

// applyLegacyPolicy runs onSuccess (SUCCEEDED) or onFailure (FAILED) ttlSecondsAfterFinished after the end;
// a job that ended otherwise (STOPPED, or failed before its Ray job did) matches neither.
func applyLegacyPolicy(o Observed, d *Decision) {
	ds, st := o.Job.Spec.DeletionStrategy, &d.Status
	var p *rayv1.DeletionPolicy
	switch st.JobStatus {
	case rayv1.JobStatusSucceeded:
		p = ds.OnSuccess
	case rayv1.JobStatusFailed:
		p = ds.OnFailure
	}
	if p == nil || p.Policy == nil || *p.Policy == rayv1.DeleteNone {
		return
	}
	if due := st.EndTime.Add(time.Duration(o.Job.Spec.TTLSecondsAfterFinished) * time.Second); o.Now.Before(due) {
		d.wantRequeue(due.Sub(o.Now))
		return
	}
	deletePolicy(o, d, *p.Policy)
}

// impact orders the deletion policies: when several rules are due at once, the most impactful runs.
var impact = map[rayv1.DeletionPolicyType]int{rayv1.DeleteNone: 1, rayv1.DeleteWorkers: 2, rayv1.DeleteCluster: 3, rayv1.DeleteSelf: 4}

// applyDeletionRules runs, of the rules for the job's status that are due and not done yet, the most
// impactful one, and asks to be woken when the next rule falls due.
func applyDeletionRules(o Observed, d *Decision) {
	st := &d.Status
	var due *rayv1.DeletionRule
	for i, rule := range o.Job.Spec.DeletionStrategy.DeletionRules {
		if !ruleMatches(rule.Condition, st) {
			continue
		}
		at := st.EndTime.Add(time.Duration(rule.Condition.TTLSeconds) * time.Second)
		if o.Now.Before(at) {
			d.wantRequeue(at.Sub(o.Now))
			continue
		}
		if policyDone(o, rule.Policy) {
			continue
		}
		if due == nil || impact[rule.Policy] > impact[due.Policy] {
			due = &o.Job.Spec.DeletionStrategy.DeletionRules[i]
		}
	}
	if due != nil {
		deletePolicy(o, d, due.Policy)
	}
}

// ruleMatches reports whether the RayJob's final status is the one cond waits for: its Ray job status, or
// (KubeRay v1.7) its deployment status.
func ruleMatches(cond rayv1.DeletionCondition, st *rayv1.RayJobStatus) bool {
	if cond.JobStatus != nil {
		return *cond.JobStatus == st.JobStatus
	}
	return cond.JobDeploymentStatus != nil && *cond.JobDeploymentStatus == st.JobDeploymentStatus
}

// policyDone reports whether what policy deletes is already gone (or going).
func policyDone(o Observed, policy rayv1.DeletionPolicyType) bool {
	rc := o.Cluster
	switch policy {
	case rayv1.DeleteNone:
		return true
	case rayv1.DeleteSelf:
		return false
	case rayv1.DeleteCluster:
		return rc == nil || rc.DeletionTimestamp != nil || !ownCluster(o.Job, rc)
	}
	if rc == nil || rc.DeletionTimestamp != nil || !ownCluster(o.Job, rc) {
		return true
	}
	for _, g := range rc.Spec.WorkerGroupSpecs {
		if !ptr.Deref(g.Suspend, false) {
			return false
		}
	}
	return true
}

// deletePolicy asks for the writes that carry out policy, unless they are done already.
func deletePolicy(o Observed, d *Decision, policy rayv1.DeletionPolicyType) {
	if policyDone(o, policy) {
		return
	}
	switch policy {
	case rayv1.DeleteCluster:
		d.Actions = append(d.Actions, Action{Kind: DeleteCluster, Cluster: o.Cluster})
	case rayv1.DeleteWorkers:
		rc := o.Cluster.DeepCopy()
		for i := range rc.Spec.WorkerGroupSpecs {
			rc.Spec.WorkerGroupSpecs[i].Suspend = ptr.To(true)
		}
		d.Actions = append(d.Actions, Action{Kind: SuspendWorkers, Cluster: rc})
	case rayv1.DeleteSelf:
		d.Actions = append(d.Actions, Action{Kind: DeleteRayJob})
	}
}
