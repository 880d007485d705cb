// volcano-sh/volcano v1.13.0:pkg/scheduler/api/namespace_info.go (excerpt: the structs whose JSON keys ringroute writes)

type NamespaceInfo struct {
	// Name is the name of this namespace
	Name NamespaceName
	// QuotaStatus stores the ResourceQuotaStatus of all ResourceQuotas in this namespace
	QuotaStatus map[string]v1.ResourceQuotaStatus
}
