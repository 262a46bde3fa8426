// Package deploy holds the files an operator deploys rollboot with (the ACL
// policies, the Nomad job files, the starting rollout policy, the systemd
// unit) and embeds them, so that `rollboot setup` applies exactly these files:
// they are the one source, read by people and by the binary alike.
package deploy

import "embed"

// Files are deploy/acl/*.policy.hcl, deploy/nomad/*.nomad.hcl,
// deploy/policy.hcl and deploy/systemd/*, at those paths.
//
//go:embed acl/*.policy.hcl nomad/*.nomad.hcl policy.hcl systemd/*
var Files embed.FS

// Read returns the file at path (e.g. "acl/rollboot-agent.policy.hcl").
func Read(path string) ([]byte, error) { return Files.ReadFile(path) }
