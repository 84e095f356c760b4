"""Generated protobuf code. Do not edit: run `make gen-protos`."""
