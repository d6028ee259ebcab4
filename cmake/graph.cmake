# Dependencies of the graph layer (include/go/graph), linked into go::go.
# The ONNX importer uses libonnx's generated protobuf classes (Debian's libonnx-dev 1.12 ships only
# onnx-ml.pb.h, so ONNX_ML must be defined; the onnx_proto target carries ONNX_ML=1 and
# ONNX_NAMESPACE=onnx, repeated here so the flags hold even if the imported target changes).
find_package(Protobuf REQUIRED)
find_package(ONNX REQUIRED CONFIG)
target_link_libraries(go PUBLIC onnx_proto protobuf::libprotobuf)
target_compile_definitions(go PUBLIC ONNX_ML=1 ONNX_NAMESPACE=onnx)
