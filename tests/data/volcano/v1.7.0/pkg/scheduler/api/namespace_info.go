// volcano-sh/volcano v1.7.0:pkg/scheduler/api/namespace_info.go (excerpt: the structs whose JSON keys ringroute writes)

type NamespaceInfo struct {
	// Name is the name of this namespace
	Name NamespaceName
	// Weight is the highest weight among many ResourceQuota.
	Weight int64

	// QuotaStatus stores the ResourceQuotaStatus of all ResourceQuotas in this namespace
	QuotaStatus map[string]v1.ResourceQuotaStatus
}
