package secrets

// Default is where the app keeps the token on macOS: the login keychain
// (dataDir is not used).
func Default(dataDir string) Store {
	return Keychain{Service: KeychainService, Account: KeychainAccount}
}
