// The one source file of llama.cpp's `common`, `cpp-httplib` and `vendor-hash`
// libraries in this project's builds (scripts/llama-common.cmake): nothing in them
// is called by the embedded backend, so they are compiled as this empty file.
namespace otb_llama_common_stub {
int unused = 0;
}
