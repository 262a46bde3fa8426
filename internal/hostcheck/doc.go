// Package hostcheck judges host records, which are the hosts' claims, against
// what Nomad and the server clusters say: records whose node is not the node
// of their name (ValidateRecords), servers and roles the clusters do not back
// (Corroborate), and agents known not to run (MissingAgents).
package hostcheck
