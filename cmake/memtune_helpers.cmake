include(GNUInstallDirs)

# The layering rule (docs/build.md): code in src/<sub>/ sees the public headers (include/)
# and its own private headers, spelled "<sub>/file.h", and nothing else of src/. Each
# subsystem gets a private include root in the build tree, private/<sub>/, holding one
# symlink <sub> -> src/<sub>; putting that root on an include path exposes src/<sub> only.

# memtune_private_root(SUB OUT_VAR): sets OUT_VAR to the private include root of subsystem
# SUB (created on first use). Fails when src/SUB does not exist.
function(memtune_private_root sub out_var)
  set(source ${PROJECT_SOURCE_DIR}/src/${sub})
  if(NOT IS_DIRECTORY ${source})
    message(FATAL_ERROR "memtune: no private headers to see: ${source} does not exist")
  endif()
  set(root ${PROJECT_BINARY_DIR}/private/${sub})
  set(link ${root}/${sub})
  set(current "")
  if(IS_SYMLINK ${link})
    file(READ_SYMLINK ${link} current)
  endif()
  if(NOT "${current}" STREQUAL "${source}")
    file(MAKE_DIRECTORY ${root})
    file(REMOVE ${link})  # a symlink: removes the link, never src/
    file(CREATE_LINK ${source} ${link} SYMBOLIC)
  endif()
  set(${out_var} ${root} PARENT_SCOPE)
endfunction()

# memtune_see_private(TARGET SUB...): lets TARGET include the private headers of each SUB
# ("SUB/file.h"). The one sanctioned way to widen what a target sees.
function(memtune_see_private target)
  foreach(sub ${ARGN})
    memtune_private_root(${sub} root)
    target_include_directories(${target} PRIVATE ${root})
  endforeach()
endfunction()

# memtune_add_subsystem(NAME [DEPS targets...] [SEES subs...]): library memtune_NAME
# (alias memtune::NAME) from src/NAME/**/*.cc, linking DEPS publicly. It sees include/ and
# src/NAME/; SEES names other subsystems whose private headers it may include too (keep that
# list short and say why next to the call). A subsystem without sources yet is an INTERFACE
# library, so the layout can grow. Every subsystem is installed and exported, and linked by
# memtune::memtune (memtune_finish_library).
function(memtune_add_subsystem name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "DEPS;SEES")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "memtune_add_subsystem(${name}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  set(target memtune_${name})
  set(public_include $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                     $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cc)
  if(srcs)
    add_library(${target} STATIC ${srcs})
    target_include_directories(${target} PUBLIC ${public_include})
    target_compile_features(${target} PUBLIC cxx_std_20)
    target_link_libraries(${target} PUBLIC ${arg_DEPS})
    memtune_see_private(${target} ${name} ${arg_SEES})
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE ${public_include})
    target_compile_features(${target} INTERFACE cxx_std_20)
    target_link_libraries(${target} INTERFACE ${arg_DEPS})
  endif()
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  add_library(memtune::${name} ALIAS ${target})
  set_property(GLOBAL APPEND PROPERTY MEMTUNE_SUBSYSTEMS ${target})
endfunction()

# memtune_finish_library(): after the last memtune_add_subsystem, defines memtune::memtune
# (every subsystem) and, with MEMTUNE_INSTALL, installs the libraries, the public headers
# and the package config (find_package(memtune) -> memtune::memtune, memtune::<sub>).
function(memtune_finish_library)
  get_property(subsystems GLOBAL PROPERTY MEMTUNE_SUBSYSTEMS)
  add_library(memtune_lib INTERFACE)
  target_link_libraries(memtune_lib INTERFACE ${subsystems})
  set_target_properties(memtune_lib PROPERTIES EXPORT_NAME memtune)
  add_library(memtune::memtune ALIAS memtune_lib)
  if(NOT MEMTUNE_INSTALL)
    return()
  endif()

  include(CMakePackageConfigHelpers)
  set(config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/memtune)
  install(TARGETS memtune_lib ${subsystems} EXPORT memtuneTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  # Public headers only: src/ (the private headers) is never installed.
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/memtune
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
  install(EXPORT memtuneTargets NAMESPACE memtune:: DESTINATION ${config_dir})
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/memtuneConfig.cmake.in
                                ${PROJECT_BINARY_DIR}/memtuneConfig.cmake
                                INSTALL_DESTINATION ${config_dir})
  # 0.x: a minor release may break the API.
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/memtuneConfigVersion.cmake
                                   COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/memtuneConfig.cmake
                ${PROJECT_BINARY_DIR}/memtuneConfigVersion.cmake
          DESTINATION ${config_dir})
endfunction()

# memtune_add_test(SUB [SEES subs...]): the GoogleTest program memtune_SUB_tests from
# tests/unit/SUB/**/*_test.cc, linking memtune::SUB (and what it links). It sees include/,
# tests/ ("unit/<sub>/helper.h") and the private headers of the subsystems in SEES only
# (often SUB itself). Registered with ctest (label unit) and built by the
# memtune_unit_tests target. Does nothing while tests/unit/SUB has no tests.
function(memtune_add_test sub)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SEES")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "memtune_add_test(${sub}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  set(dir ${PROJECT_SOURCE_DIR}/tests/unit/${sub})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${dir}/*_test.cc)
  if(NOT srcs)
    return()
  endif()
  set(target memtune_${sub}_tests)
  add_executable(${target} ${srcs})
  target_link_libraries(${target} PRIVATE memtune::${sub} GTest::gtest_main GTest::gmock)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  memtune_see_private(${target} ${arg_SEES})
  target_compile_definitions(${target} PRIVATE MEMTUNE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_dependencies(memtune_unit_tests ${target})
  gtest_discover_tests(${target} PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)
endfunction()

# memtune_embed_files(TARGET VAR OUTPUT FILES...): compiles text files into TARGET as
# `extern const memtune::EmbeddedFile VAR[]` (name + contents), terminated by {nullptr, nullptr}.
function(memtune_embed_files target var output)
  set(files ${ARGN})
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${output} -DVAR=${var} "-DFILES=${files}"
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_files.cmake
    DEPENDS ${files} ${PROJECT_SOURCE_DIR}/cmake/embed_files.cmake
    COMMENT "Embedding ${var}"
    VERBATIM)
  target_sources(${target} PRIVATE ${output})
endfunction()
