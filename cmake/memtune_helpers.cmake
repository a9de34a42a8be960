# memtune_add_subsystem(NAME DEPS...): library memtune_NAME from src/NAME/*.cc.
# A subsystem without sources yet is an INTERFACE library, so the layout can grow.
function(memtune_add_subsystem name)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cc)
  if(srcs)
    add_library(memtune_${name} STATIC ${srcs})
    target_include_directories(memtune_${name} PUBLIC ${PROJECT_SOURCE_DIR}/include
                               PRIVATE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(memtune_${name} PUBLIC ${ARGN})
  else()
    add_library(memtune_${name} INTERFACE)
    target_include_directories(memtune_${name} INTERFACE ${PROJECT_SOURCE_DIR}/include)
    target_link_libraries(memtune_${name} INTERFACE ${ARGN})
  endif()
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
