# Dependencies of the graph layer (include/go/graph), linked into go::go.
