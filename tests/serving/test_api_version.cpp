// TRITONBACKEND_Initialize against servers of other backend API versions, and instances of kinds
// the backend does not run. This program plays the server: it exports the few TRITONSERVER_* /
// TRITONBACKEND_* calls those paths make (reporting whatever version or kind a test sets), opens
// libtriton_kiln.so with dlopen as Triton does, and checks what is accepted and what is refused
// with which message. (A real server without GPUs refuses KIND_GPU itself, before the backend.)
#include <dlfcn.h>

#include <cstdint>
#include <string>

#include "doctest/doctest.h"

namespace {

struct FakeError {
  int code;
  std::string message;
};

uint32_t server_major = 1;
int instance_kind = 1;  // TRITONSERVER_INSTANCEGROUPKIND_CPU
uint32_t server_minor = 19;
std::string logged;

}  // namespace

#define SERVER_CALL extern "C" __attribute__((visibility("default")))

SERVER_CALL void* TRITONSERVER_ErrorNew(int code, const char* message) { return new FakeError{code, message}; }
SERVER_CALL void TRITONSERVER_ErrorDelete(void* error) { delete static_cast<FakeError*>(error); }
SERVER_CALL const char* TRITONSERVER_ErrorMessage(void* error) { return static_cast<FakeError*>(error)->message.c_str(); }
SERVER_CALL int TRITONSERVER_ErrorCode(void* error) { return static_cast<FakeError*>(error)->code; }
SERVER_CALL bool TRITONSERVER_LogIsEnabled(int) { return true; }
SERVER_CALL void* TRITONSERVER_LogMessage(int, const char*, int, const char* message) {
  logged += std::string(message) + "\n";
  return nullptr;
}
SERVER_CALL void* TRITONBACKEND_ApiVersion(uint32_t* major, uint32_t* minor) {
  *major = server_major;
  *minor = server_minor;
  return nullptr;
}
SERVER_CALL void* TRITONBACKEND_ModelInstanceKind(void*, int* kind) {
  *kind = instance_kind;
  return nullptr;
}
SERVER_CALL void* TRITONBACKEND_BackendName(void*, const char** name) {
  *name = "kiln";
  return nullptr;
}

namespace {

using Initialize = void* (*)(void* backend);

Initialize open_backend(const char* entry_point = "TRITONBACKEND_Initialize") {
  void* library = dlopen(KILN_TRITON_BACKEND_PATH, RTLD_LAZY | RTLD_LOCAL);
  const std::string why = library ? "" : dlerror();
  REQUIRE_MESSAGE(library != nullptr, why);
  auto initialize = reinterpret_cast<Initialize>(dlsym(library, entry_point));
  const bool found = initialize != nullptr;
  REQUIRE(found);
  return initialize;
}

// Initialize's error message against a server reporting major.minor, or "" when it accepts it.
std::string initialize_at(uint32_t major, uint32_t minor) {
  server_major = major;
  server_minor = minor;
  auto* error = static_cast<FakeError*>(open_backend()(nullptr));
  std::string message = error ? error->message : "";
  delete error;
  return message;
}

}  // namespace

TEST_CASE("the backend accepts backend API 1.19 and later 1.x") {
  logged.clear();
  CHECK(initialize_at(1, 19) == "");
  CHECK(logged.find("kiln: backend 'kiln' with libkiln") != std::string::npos);
  CHECK(initialize_at(1, 27) == "");
}

TEST_CASE("the backend refuses another major version and an older minor one") {
  CHECK(initialize_at(2, 0) ==
        "kiln backend: unsupported: this server's backend API is 2.0; libtriton_kiln needs 1.x with x >= 19");
  CHECK(initialize_at(1, 10) ==
        "kiln backend: unsupported: this server's backend API is 1.10; libtriton_kiln needs 1.x with x >= 19");
  CHECK(initialize_at(0, 99).find("unsupported: this server's backend API is 0.99") != std::string::npos);
}

TEST_CASE("instances of KIND_GPU and KIND_MODEL are refused as unsupported") {
  for (int kind : {2, 3}) {
    instance_kind = kind;
    auto* error = static_cast<FakeError*>(open_backend("TRITONBACKEND_ModelInstanceInitialize")(nullptr));
    REQUIRE(error != nullptr);
    CHECK(error->code == 5);  // TRITONSERVER_ERROR_UNSUPPORTED
    CHECK(error->message ==
          "kiln backend: unsupported: instances of a kind other than KIND_CPU (KIND_GPU is not implemented)");
    delete error;
  }
}
