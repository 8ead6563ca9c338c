package cpu

// kernelFeatures reports the flags that choose the integer kernels
// (q8rows_amd64.go, q8_amd64.go), read at each call since tests switch them.
func kernelFeatures() (vnni, q8 bool) { return hasVNNI, hasQ8 }
