"""Model repository: config.pbtxt through protobuf, serving variants, validation, layout."""
