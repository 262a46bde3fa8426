# rollboot-operator: a person or script running the rollboot CLI:
# `rollboot status`, `request`, `cancel`, `pause`, `resume`, `release`.
#
#   nomad acl policy apply -description "rollboot CLI" rollboot-operator rollboot-operator.policy.hcl
#
# Written for the default state prefix "rollboot" in namespace "default". For
# another state.prefix, replace "rollboot/" in both paths; for another
# nomad.namespace, rename the namespace block.
#
# The CLI never touches nodes: every change it makes is a check-and-set write of
# rollboot/control, which the coordinator carries out with its own token.

namespace "default" {
  variables {
    # `rollboot status`: GET /v1/vars?prefix=rollboot/hosts/ and
    # ?prefix=rollboot/plan/ (read implies list), GET of each record.
    # Read-only on the rest of rollboot's state.
    path "rollboot/*" {
      capabilities = ["read"]
    }

    # request, cancel, pause, resume, release: GET rollboot/control, then
    # PUT rollboot/control?cas=N (cas=0 when it does not exist yet). The most
    # specific path rule wins, so read is repeated here.
    path "rollboot/control" {
      capabilities = ["read", "write"]
    }
  }
}
