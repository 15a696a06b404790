# [DESTDIR=<dir>] cmake -DMANIFEST=<build>/install_manifest.txt -P cmake/uninstall.cmake
#
# Removes exactly what the last install from that build put in place: each
# file and symbolic link the manifest lists, and nothing else; directories
# stay, they may hold other things. The manifest names the installed paths
# without DESTDIR: a staged install is removed with the same DESTDIR.
if(NOT MANIFEST)
  message(FATAL_ERROR "usage: cmake -DMANIFEST=<build>/install_manifest.txt -P uninstall.cmake")
endif()
if(NOT EXISTS "${MANIFEST}")
  message(FATAL_ERROR "${MANIFEST} not found: nothing was installed from this build")
endif()
file(STRINGS "${MANIFEST}" files)
foreach(listed IN LISTS files)
  set(file "$ENV{DESTDIR}${listed}")
  if(IS_SYMLINK "${file}" OR EXISTS "${file}")
    message(STATUS "Removing ${file}")
    file(REMOVE "${file}")
    if(IS_SYMLINK "${file}" OR EXISTS "${file}")
      message(FATAL_ERROR "could not remove ${file}")
    endif()
  else()
    message(STATUS "Not there: ${file}")
  endif()
endforeach()
