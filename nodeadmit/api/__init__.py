"""The gRPC form of the plugin protocol: podadmission.proto and its generated (committed) stubs."""
